"""Each run of the suite apart from every other: its name, its folder, its database.

A fresh machine holds nothing that an earlier run of the suite left; a reused CI machine may
hold a database with an earlier run's tables, containers and SLURM jobs of a run that
crashed, files in /tmp. A test that passed only because of them failed on a fresh machine
(issue 30), so each run gets its own of each, named after the run, and removes them when it
ends; what a crashed run left, the next run removes:

- The run's name, `dlbs_t_<host>_<pid>_<start>`: the host (8 characters), process id and
  start time (UTC, yymmddHHMMSS: the paths of tests stay short) of the process that started
  the run (pytest-xdist's controller; pytest itself without workers). The run is over when
  that process no longer runs (a run of another host: a day after its start).
- Its folder, `<tmp>/<name>/`: pytest's basetemp (`p/`: every test's tmp_path), the
  TMPDIR of every process the run starts (`tmp/`: tempfile's files, PyTorch's compile
  cache), the workers' lock and groups (tests/parallel.py). Removed at the end when every
  test passed, kept for a look otherwise; the next run removes the folders of runs that are
  over.
- Its PostgreSQL database, named as the run: created at the first `postgres_url()` of any of
  its processes, dropped at the end with the roles its tests made (`role_name()`); the
  process that creates it drops the databases and roles of runs that are over.
- Its containers and SLURM jobs: a test's containers mount folders of its tmp_path and its
  jobs run there, so they name the run; the first test of a worker that takes the Docker
  Engine, Podman or SLURM removes those of runs that are over (`sweep_containers`,
  `sweep_jobs`), and the containers of the test image that a dead dlbs left stopped. The
  jobs a test leaves in its tmp_path are cancelled when it ends (`cancel_jobs_in`): the
  next test finds both nodes free.

What is made once from the sources and checked against them on each run (the venv, the test
image, with its fingerprint, bytecode, pytest's rewritten test modules, Matplotlib's font
list) is the same on every machine and is kept; docs/targets.md lists both kinds.
"""

from __future__ import annotations

import calendar
import contextlib
import fcntl
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

RUN_ENV = "DLBS_TEST_RUN"
FOLDER_ENV = "DLBS_TEST_RUN_FOLDER"
_PREFIX = "dlbs_t_"
_NAME = re.compile(r"dlbs_t_([a-z0-9]{1,8})_(\d+)_(\d{12})")
_STAMP = "%y%m%d%H%M%S"
#: How long a run of another host (whose processes cannot be looked at) is taken to last.
_ELSEWHERE_S = 24 * 3600
#: Containers of the test image that a dead dlbs left stopped are removed after this long:
#: a run's own are removed by it within seconds (`--rm`, or its probes' removal).
_STOPPED_CONTAINER_S = 600
TEST_IMAGE = "dlbs-test:latest"
_exit_status = pytest.StashKey[int]()


# -- the run's name and whether it is over ----------------------------------------------------

def _host() -> str:
    return re.sub(r"[^a-z0-9]", "", socket.gethostname().lower())[:8] or "host"


def _boot_time() -> float:
    with open("/proc/stat") as stat:
        return float(next(line.split()[1] for line in stat if line.startswith("btime ")))


def _start_stamp(pid: int) -> str | None:
    """When process `pid` started (UTC, `_STAMP`), or None when it does not run."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    started = _boot_time() + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return time.strftime(_STAMP, time.gmtime(int(started)))


def _new_name() -> str:
    pid = os.getpid()
    return f"{_PREFIX}{_host()}_{pid}_{_start_stamp(pid)}"


def is_over(name: str) -> bool:
    """Whether the run called `name` has ended (False for a name that names no run)."""
    found = _NAME.fullmatch(name)
    if found is None:
        return False
    host, pid, stamp = found.groups()
    if host != _host():
        try:
            started = calendar.timegm(time.strptime(stamp, _STAMP))
        except ValueError:   # not a time: not a name of ours
            return False
        return time.time() - started > _ELSEWHERE_S
    return _start_stamp(int(pid)) != stamp


def _runs_over_in(text: str) -> set[str]:
    """The runs that are over among those `text` names."""
    return {found.group(0) for found in _NAME.finditer(text) if is_over(found.group(0))}


def name() -> str:
    """The name of the run this process belongs to (set by `begin`)."""
    return os.environ[RUN_ENV]


def folder() -> Path:
    """The folder of the run this process belongs to."""
    return Path(os.environ[FOLDER_ENV])


# -- the start and the end -------------------------------------------------------------------

def begin(config: pytest.Config) -> None:
    """Name the run, make its folder, remove the folders of runs that are over.

    In the process that started the run; its workers and every process they start inherit
    the name, the folder and TMPDIR through the environment.
    """
    if getattr(config, "workerinput", None) is not None:
        return
    root = Path(tempfile.gettempdir())
    sweep_folders(root)
    run = _new_name()
    home = root / run
    (home / "tmp").mkdir(mode=0o700, parents=True, exist_ok=True)
    os.environ[RUN_ENV] = run
    os.environ[FOLDER_ENV] = str(home)
    os.environ["TMPDIR"] = str(home / "tmp")
    tempfile.tempdir = None
    if config.option.basetemp is None:
        config.option.basetemp = str(home / "p")


def sweep_folders(root: Path) -> None:
    """Remove the folders in `root` of runs that are over."""
    for entry in root.glob(f"{_PREFIX}*"):
        if entry.is_dir() and is_over(entry.name):
            shutil.rmtree(entry, ignore_errors=True)


def note_exit_status(session: pytest.Session, exitstatus: int) -> None:
    """Remember how the run ended, for `end`."""
    session.config.stash[_exit_status] = int(exitstatus)


def end(config: pytest.Config) -> None:
    """Drop the run's database and roles; remove its folder if every test passed."""
    if getattr(config, "workerinput", None) is not None or RUN_ENV not in os.environ:
        return
    server = _known_server()
    if server is not None:
        with contextlib.suppress(Exception):   # a server gone by now: the next run drops it
            _drop_runs(server, {name()})
    if config.stash.get(_exit_status, 1) in (0, 5):   # passed, or nothing to run
        shutil.rmtree(folder(), ignore_errors=True)


# -- PostgreSQL --------------------------------------------------------------------------------

_databases: dict[str, str] = {}


def database_url(server_url: str) -> str:
    """The URL of this run's database on the server of `server_url`; made at the first call.

    The processes of a run take turns (a lock in the run's folder); the one that makes it
    also drops the databases and roles of runs that are over.
    """
    if server_url in _databases:
        return _databases[server_url]
    import psycopg
    import psycopg.sql

    run = name()
    with _locked(folder() / "postgres.lock"):
        with psycopg.connect(server_url, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (run,)).fetchone()
            if not exists:
                # template0 takes no connections: another run making its database at the same
                # moment cannot hold it ("source database is being accessed by other users").
                conn.execute(psycopg.sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(
                    psycopg.sql.Identifier(run)))
                _remember_server(server_url)
        if not exists:
            sweep_databases(server_url)
    parts = urllib.parse.urlsplit(server_url)
    url = urllib.parse.urlunsplit(parts._replace(path=f"/{run}"))
    _databases[server_url] = url
    return url


def sweep_databases(server_url: str) -> None:
    """Drop the databases and roles that runs which are over left on a server."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        over = _runs_over_in(" ".join(row[0] for row in conn.execute(
            "SELECT datname FROM pg_database UNION ALL SELECT rolname FROM pg_roles")))
    if over:
        _drop_runs(server_url, over)


def role_name(kind: str) -> str:
    """A name for a role a test makes: the run's, so that the run's end drops it."""
    import uuid

    return f"{name()}_{kind}_{uuid.uuid4().hex[:8]}"[:63]


def _drop_runs(server_url: str, runs: set[str]) -> None:
    """Drop the databases of `runs`, then their roles (which may have used only those)."""
    import psycopg
    import psycopg.sql

    with psycopg.connect(server_url, autocommit=True) as conn:
        for run in sorted(runs):
            conn.execute(psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                psycopg.sql.Identifier(run)))
            roles = [row[0] for row in conn.execute(
                "SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)", (f"{run}_",))]
            for role in roles:
                conn.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(
                    psycopg.sql.Identifier(role)))


def _remember_server(server_url: str) -> None:
    """Where the run's database is, for `end` (a worker may have found the server itself)."""
    path = folder() / "postgres-server"
    path.touch(mode=0o600)
    path.write_text(server_url)


def _known_server() -> str | None:
    path = folder() / "postgres-server"
    return path.read_text() if path.is_file() else None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    handle = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


# -- containers and SLURM jobs ------------------------------------------------------------------

def sweep_containers(client: Any) -> None:
    """Remove the containers that runs which are over left in an engine (Docker or Podman).

    Theirs: a container that mounts a folder of such a run; one of the test image that is
    not running, whose dlbs (label `dlbs.run`) no longer runs, made `_STOPPED_CONTAINER_S`
    ago or more (a probe has no owner label: the same).
    """
    from dlbs.run.targets.orphans import owner_lives

    for container in client.containers.list(all=True):
        attrs = container.attrs or {}
        sources = " ".join(str(mount.get("Source", "")) for mount in attrs.get("Mounts") or [])
        labels = container.labels or {}
        image = (attrs.get("Config") or {}).get("Image", "")
        stale = image.rsplit("/", 1)[-1] in (TEST_IMAGE, TEST_IMAGE.removesuffix(":latest")) and \
            container.status != "running" and \
            not owner_lives(labels.get("dlbs.run", ""), elsewhere=True) and \
            _age_s(attrs.get("Created", "")) > _STOPPED_CONTAINER_S
        if _runs_over_in(sources) or stale:
            with contextlib.suppress(Exception):   # gone meanwhile: what was wanted
                container.remove(force=True)


def _age_s(created: str) -> float:
    """Seconds since an engine's `Created` time (RFC 3339, nanoseconds; 0 if unreadable)."""
    found = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)", created)
    if found is None:
        return 0.0
    return time.time() - calendar.timegm(time.strptime(found.group(1), "%Y-%m-%dT%H:%M:%S"))


def _jobs() -> list[tuple[str, str]]:
    """(job id, `<work dir>|<command>`) of every job SLURM still lists."""
    listed = subprocess.run(["squeue", "-h", "-o", "%i|%Z|%o"], capture_output=True,
                            text=True, timeout=30, check=False)
    return [(line.split("|", 1)[0], line.split("|", 1)[1])
            for line in listed.stdout.splitlines() if "|" in line]


def sweep_jobs() -> None:
    """Cancel the SLURM jobs that runs which are over left: their folder or script is theirs."""
    over = [job for job, where in _jobs() if _runs_over_in(where)]
    if over:
        subprocess.run(["scancel", *over], capture_output=True, timeout=30, check=False)


def cancel_jobs_in(folder: Path, limit: float = 60.0) -> list[str]:
    """Cancel the jobs whose folder or script is in `folder`, and wait until SLURM lists none.

    A test's jobs run in its tmp_path. One it leaves queued or running (a sweep it stopped
    with slurm.on_interrupt: keep, a job whose id it replaced in a store) would hold a node
    of the two while the next test runs, whose jobs then wait for it (a minute-long job left
    by an adoption test made the out-of-memory test's batch 16 wait behind batch 8, so
    that it was cancelled as queued). Returns the jobs cancelled.
    """
    prefix = f"{folder}/"

    def left() -> list[str]:
        return [job for job, where in _jobs()
                if any(f"{part}/".startswith(prefix) for part in where.split("|"))]

    found = left()
    if found:
        subprocess.run(["scancel", *found], capture_output=True, timeout=30, check=False)
        deadline = time.monotonic() + limit
        while left() and time.monotonic() < deadline:
            time.sleep(0.2)
    return found
