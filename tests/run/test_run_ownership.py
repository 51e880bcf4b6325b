"""What a run may stop and which results database it may use (issue 24, items 2 and 3).

- A results database is locked by its identity: a symbolic link (to it or to a folder
  above it), a relative path, a hard link to a live run's database never lets a second run
  in; an open attempt owned by a run that still runs stops a run that got in another way.
- Only processes that carry an attempt's token are ever stopped, and never those of a run
  that still runs: an attempt row crafted with another process's pid and start time stops
  nothing. A benchmark's own `setsid` children (which carry the token) are stopped when the
  attempt ends: normally, by `exp.timeout`, or by SIGTERM to dlbs.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dlbs.errors import ResultsError
from dlbs.results.sqlite_store import DatabaseLock, database_lock_path
from dlbs.results.store import open_store
from dlbs.run import marks
from dlbs.run.targets.orphans import (
    boot_id,
    find_tree,
    owner_identity,
    owner_lives,
    start_ticks,
    stop_tree,
)
from tests.run.conftest import attempts, gated, open_attempts, pid_alive, wait_until

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=1", "-P", "exp.num_warmup_batches=0",
         "-P", "dummy.sleep=0"]


def _sleeper(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "600"], start_new_session=True,
                            env={**os.environ, **(env or {})})


def _identity(pid: int) -> str:
    return f"{pid}:{start_ticks(pid)}:{boot_id()}:{socket.gethostname()}"


def _alive(process: subprocess.Popen[bytes]) -> bool:
    return process.poll() is None


@pytest.fixture
def sleepers():
    """Start sleepers; whatever the test left running goes with it."""
    started: list[subprocess.Popen[bytes]] = []

    def start(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        started.append(_sleeper(env))
        return started[-1]

    yield start
    for process in started:
        process.kill()
        process.wait()


# -- the database's identity -----------------------------------------------------------------

def _aliases(tmp_path: Path, database: Path) -> dict[str, Path]:
    """Other names of `database`: links of every kind, and paths that walk around."""
    (tmp_path / "b").mkdir()
    link = tmp_path / "b" / "results.db"
    link.symlink_to(database)
    relative = tmp_path / "b" / "relative.db"
    relative.symlink_to(os.path.relpath(database, relative.parent))
    chain = tmp_path / "b" / "chain.db"
    chain.symlink_to(link)
    folder = tmp_path / "folder-link"
    folder.symlink_to(database.parent)
    return {"symlink": link, "relative symlink": relative, "symlink chain": chain,
            "symlinked folder": folder / database.name,
            "dot-dot path": tmp_path / "b" / ".." / database.parent.name / database.name,
            "double slash": Path(str(database.parent) + "//" + database.name)}


def test_every_name_of_a_database_has_the_one_lock(tmp_path):
    (tmp_path / "a").mkdir()
    database = tmp_path / "a" / "results.db"
    database.write_bytes(b"")
    with DatabaseLock(database):
        for what, alias in _aliases(tmp_path, database).items():
            assert database_lock_path(alias) == database_lock_path(database), what
            with pytest.raises(ResultsError, match="another dlbs run is using results "
                                                   rf"database .* \(pid {os.getpid()}\)"):
                DatabaseLock(alias).acquire()


def test_a_link_to_a_database_not_yet_created_has_its_lock_too(tmp_path):
    (tmp_path / "a").mkdir()
    database = tmp_path / "a" / "results.db"  # the first run creates it later
    link = tmp_path / "results.db"
    link.symlink_to(database)
    with DatabaseLock(database):
        with pytest.raises(ResultsError, match="another dlbs run is using"):
            DatabaseLock(link).acquire()


@pytest.mark.parametrize("where", ["same folder", "other folder"])
def test_a_database_with_a_hard_link_is_refused(tmp_path, where):
    (tmp_path / "a").mkdir()
    database = tmp_path / "a" / "results.db"
    database.write_bytes(b"")
    folder = tmp_path / "a" if where == "same folder" else tmp_path / "b"
    folder.mkdir(exist_ok=True)
    os.link(database, folder / "other.db")
    for name in (database, folder / "other.db"):
        with pytest.raises(ResultsError, match="has 1 other hard link"):
            DatabaseLock(name).acquire()
        assert not DatabaseLock(name).held


def _live_run(tmp_path: Path, db: Path) -> tuple[subprocess.Popen[str], Path]:
    """A `dlbs run` of `tmp_path/a` holding its benchmark back (its attempt open)."""
    folder = tmp_path / "a"
    folder.mkdir()
    release = tmp_path / "release"
    run = subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "run", *DUMMY,
                            *gated(release)], cwd=folder, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_until(lambda: open_attempts(db) == 1, "the first run did not open its attempt")
    return run, release


@pytest.mark.parametrize("link", ["symlink", "hard link", "symlinked folder"])
def test_a_second_run_through_another_name_stops_nothing(dlbs_cli, tmp_path, link):
    """Issue 24, item 2: run B on a link to run A's live database."""
    db = tmp_path / "a" / "logs" / "results.db"
    first, release = _live_run(tmp_path, db)
    try:
        second = tmp_path / "b"
        second.mkdir()
        name = second / "results.db"
        if link == "symlink":
            name.symlink_to(db)
        elif link == "hard link":
            os.link(db, name)
        else:
            (second / "folder").symlink_to(db.parent)
            name = second / "folder" / "results.db"
        result = dlbs_cli("run", *DUMMY, "-P", f"runtime.results_db={name}", "-P",
                          "exp.model=other", cwd=second, timeout=180)
        assert result.returncode == 2, result.stderr
        expected = "has 1 other hard link" if link == "hard link" else \
            f"another dlbs run is using results database {name}"
        assert expected in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
        assert [row[2] for row in attempts(db)] == [None]  # A's attempt: open, untouched
    finally:
        release.touch()
        _, err = first.communicate(timeout=180)
    assert first.returncode == 0, err
    assert [row[2] for row in attempts(db)] == ["ok"]


def test_an_attempt_of_a_live_run_stops_a_run_that_got_in(dlbs_cli, tmp_path, sleepers):
    """However a second run got past the lock, a live owner in the database stops it."""
    owner = sleepers()  # stands for a live dlbs run that owns the attempt
    mark = {**marks.new_mark("local"), "owner": _identity(owner.pid)}
    db = tmp_path / "logs" / "results.db"
    with open_store(db) as store:
        store.record_start("live", 1, {"exp.id": "live"}, job_id=marks.encode(mark))
    result = dlbs_cli("run", *DUMMY, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert (f"experiment live, attempt 1 belongs to a dlbs run that still runs (pid "
            f"{owner.pid}): another run uses this database under another name") in result.stderr
    assert attempts(db) == [("live", 1, None, None)]  # nothing closed, nothing ran
    owner.kill()
    owner.wait()
    result = dlbs_cli("run", *DUMMY, cwd=tmp_path)  # its owner is gone: settled as usual
    assert result.returncode == 0, result.stderr
    assert attempts(db)[0][2] == "interrupted"


# -- only what carries the token, never what a live run owns ------------------------------------

def _crafted_row(db: Path, exp_id: str, mark: dict) -> None:
    with open_store(db) as store:
        store.record_start(exp_id, 1, {"exp.id": exp_id}, job_id=marks.encode(mark))


@pytest.mark.parametrize("token", ["", "0" * 32, "the-victims-own"])
def test_a_crafted_attempt_row_never_stops_an_unrelated_process(dlbs_cli, tmp_path, sleepers,
                                                                token):
    """Issue 24, item 3: a row naming a process group leader's pid and start time."""
    live_owner = sleepers()
    victim_env = {}
    if token == "the-victims-own":  # it carries a token, but its run still runs
        token = uuid.uuid4().hex
        victim_env = {marks.TOKEN_VARIABLE: token, marks.OWNER_VARIABLE:
                      _identity(live_owner.pid)}
    victim = sleepers(victim_env)
    gone = sleepers()
    dead_owner = _identity(gone.pid)
    gone.kill()
    gone.wait()
    mark = {**marks.new_mark("local"), "token": token, "pid": victim.pid,
            "start": start_ticks(victim.pid), "owner": dead_owner}
    db = tmp_path / "logs" / "results.db"
    _crafted_row(db, "crafted", mark)
    result = dlbs_cli("run", *DUMMY, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert _alive(victim), result.stderr
    assert "left running by a dlbs run that died" not in result.stderr
    assert attempts(db)[0][:3] == ("crafted", 1, "interrupted")


def test_what_carries_the_token_of_a_dead_run_is_stopped(sleepers):
    token = uuid.uuid4().hex
    gone = sleepers()
    dead_owner = _identity(gone.pid)
    gone.kill()
    gone.wait()
    orphan = sleepers({marks.TOKEN_VARIABLE: token, marks.OWNER_VARIABLE: dead_owner})
    old_dlbs = sleepers({marks.TOKEN_VARIABLE: token})  # an older dlbs set no owner
    stopped = stop_tree(marks.TOKEN_VARIABLE, token, 5.0, marks.OWNER_VARIABLE)
    assert sorted(p.pid for p in stopped) == sorted([orphan.pid, old_dlbs.pid])
    assert orphan.wait(timeout=30) == -signal.SIGTERM


@pytest.mark.parametrize(("owner", "lives"), [
    ("alive", True), ("this process", False), ("dead", False), ("other host", True),
    ("other boot", True), ("garbage", False), ("", False), ("1:2", False),
])
def test_which_owners_count_as_running(sleepers, owner, lives):
    other = sleepers()
    host, boot = socket.gethostname(), boot_id()
    identities = {
        "alive": _identity(other.pid), "this process": owner_identity(),
        "dead": f"{other.pid}:{(start_ticks(other.pid) or 0) + 1}:{boot}:{host}",
        "other host": f"{other.pid}:1:{boot}:elsewhere", "other boot": f"1:1:earlier:{host}",
        "garbage": "x:y:z", "": "", "1:2": "1:2"}
    assert owner_lives(identities[owner]) is lives
    if owner in ("other host", "other boot"):
        assert owner_lives(identities[owner], elsewhere=False) is False


def test_a_process_of_a_live_run_is_never_stopped_with_its_token(sleepers):
    token = uuid.uuid4().hex
    owner = sleepers()
    process = sleepers({marks.TOKEN_VARIABLE: token,
                        marks.OWNER_VARIABLE: _identity(owner.pid)})
    assert stop_tree(marks.TOKEN_VARIABLE, token, 1.0, marks.OWNER_VARIABLE) == []
    assert _alive(process)
    assert list(find_tree(marks.TOKEN_VARIABLE, token)) == [process.pid]  # it carries it


# -- a benchmark's own setsid children ---------------------------------------------------------

def _leaver(escaped: Path) -> list[str]:
    """A `runtime.launcher` that leaves a worker in a session of its own, then runs."""
    script = f"setsid sleep 600 & echo $! > '{escaped}'; exec \"$@\""
    return ["-P", f"runtime.launcher=sh -c '{script}' leaver"]


def _escaped(escaped: Path) -> int:
    wait_until(lambda: escaped.exists() and escaped.read_text().strip(), "no worker started")
    return int(escaped.read_text())


@pytest.mark.parametrize("end", ["normal", "exp.timeout", "SIGTERM"])
def test_a_benchmarks_setsid_children_end_with_its_attempt(tmp_path, end):
    escaped = tmp_path / "escaped.pid"
    args = [*DUMMY, *_leaver(escaped)]
    if end != "normal":
        args += ["-P", "dummy.sleep=1", "-P", "exp.num_batches=3600"]
    if end == "exp.timeout":
        args += ["-P", "exp.timeout=3"]
    sweep = subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "run", *args],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    worker = _escaped(escaped)
    try:
        if end == "SIGTERM":
            wait_until(lambda: any("dummy backend" in log.read_text(errors="replace")
                                   for log in (tmp_path / "logs").glob("*.log")),
                       "the backend did not print")
            os.kill(sweep.pid, signal.SIGTERM)
        _, err = sweep.communicate(timeout=180)
        assert not pid_alive(worker), f"the setsid worker outlived its attempt: {err}"
    finally:
        if pid_alive(worker):
            os.kill(worker, signal.SIGKILL)
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    expected = {"normal": (0, "ok"), "exp.timeout": (1, "timeout"),
                "SIGTERM": (143, "interrupted")}[end]
    assert (sweep.returncode, attempts(tmp_path / "logs" / "results.db")[0][2]) == expected, err
