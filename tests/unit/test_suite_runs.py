"""tests/runs.py: each run of the suite has its own, and removes what crashed runs left.

A crashed run is made here by its name: one whose process (a `sleep` that this test started
and ended) no longer runs. What it left in each service is then made by hand, as such a run
would have left it, and the sweep of that service must remove it and nothing of a run that
still runs (this one).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from tests import runs
from tests.targets.conftest import docker_client, slurm_cluster, test_image  # noqa: F401


def _a_crashed_run() -> str:
    """The name a run would have had, whose process has ended."""
    process = subprocess.Popen(["sleep", "30"])
    try:
        stamp = runs._start_stamp(process.pid)
    finally:
        process.kill()
        process.wait()
    return f"dlbs_t_{runs._host()}_{process.pid}_{stamp}"


def test_a_run_is_over_when_its_process_is_gone_or_another_started_with_its_pid() -> None:
    crashed = _a_crashed_run()
    assert runs.is_over(crashed)
    assert not runs.is_over(runs.name())
    pid, stamp = runs.name().rsplit("_", 2)[1:]
    earlier = time.strftime("%y%m%d%H%M%S", time.gmtime(time.time() - 7200))
    assert runs.is_over(runs.name().replace(f"_{pid}_{stamp}", f"_{pid}_{earlier}"))
    elsewhere = f"dlbs_t_othrhost_{os.getpid()}_"
    assert not runs.is_over(elsewhere + time.strftime("%y%m%d%H%M%S", time.gmtime()))
    assert runs.is_over(elsewhere + time.strftime("%y%m%d%H%M%S",
                                                  time.gmtime(time.time() - 2 * 86400)))
    assert not runs.is_over("dlbs") and not runs.is_over("dlbs_t_x_1_2")
    assert runs.is_over("dlbs_t_othrhost_1_000101000000")
    assert not runs.is_over("dlbs_t_othrhost_1_009999999999")


def test_the_run_has_its_folder_temporary_files_and_basetemp(tmp_path: Path) -> None:
    import tempfile

    assert runs.folder().name == runs.name()
    assert Path(tempfile.gettempdir()) == runs.folder() / "tmp"
    assert runs.folder() / "p" in tmp_path.parents
    done = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.mkdtemp())"],
                          capture_output=True, text=True, check=True)
    assert Path(done.stdout.strip()).parent == runs.folder() / "tmp"


def test_the_folder_of_a_crashed_run_is_removed_and_a_live_one_kept(tmp_path: Path) -> None:
    crashed = tmp_path / _a_crashed_run()
    live = tmp_path / runs.name()
    for folder in (crashed, live):
        (folder / "tmp").mkdir(parents=True)
    runs.sweep_folders(tmp_path)
    assert not crashed.exists() and live.is_dir()


@pytest.mark.postgres
def test_the_run_has_its_own_database_and_a_crashed_run_s_is_dropped() -> None:
    import psycopg
    import psycopg.sql

    from tests.results.helpers_results import _server_url, postgres_url

    assert urllib.parse.urlsplit(postgres_url()).path == f"/{runs.name()}"
    server = _server_url()
    crashed = _a_crashed_run()
    role = f"{crashed}_cred_0"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(
            psycopg.sql.Identifier(crashed)))
        conn.execute(psycopg.sql.SQL("CREATE ROLE {}").format(psycopg.sql.Identifier(role)))
    runs.sweep_databases(server)
    with psycopg.connect(server, autocommit=True) as conn:
        names = {row[0] for row in conn.execute(
            "SELECT datname FROM pg_database UNION ALL SELECT rolname FROM pg_roles")}
    assert crashed not in names and role not in names and runs.name() in names


@pytest.mark.slurm
def test_a_crashed_run_s_slurm_jobs_are_cancelled(tmp_path: Path,
                                                  request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("slurm_cluster")
    crashed = tmp_path / _a_crashed_run()
    crashed.mkdir()
    mine = subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", "-D", str(tmp_path),
                           "--wrap", "sleep 300"], capture_output=True, text=True, check=True)
    theirs = subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", "-D", str(crashed),
                             "--wrap", "sleep 300"], capture_output=True, text=True, check=True)
    ids = [mine.stdout.strip(), theirs.stdout.strip()]
    try:
        runs.sweep_jobs()
        states = dict(line.split() for line in subprocess.run(
            ["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i %T"],
            capture_output=True, text=True, check=True).stdout.splitlines())
        assert states[ids[1]] in ("CANCELLED", "COMPLETING") and \
            states[ids[0]] in ("PENDING", "RUNNING")
    finally:
        subprocess.run(["scancel", *ids], check=False)


@pytest.mark.docker
def test_a_crashed_run_s_containers_are_removed(tmp_path: Path,
                                                request: pytest.FixtureRequest) -> None:
    client = request.getfixturevalue("docker_client")
    image = request.getfixturevalue("test_image")["name"]
    crashed = tmp_path / _a_crashed_run()
    crashed.mkdir()
    made = []
    try:
        for folder in (crashed, tmp_path):
            made.append(client.containers.create(
                image, ["sleep", "300"], labels={"dlbs.test": "sweep"},
                volumes={str(folder): {"bind": "/data", "mode": "ro"}}))
        runs.sweep_containers(client)
        left = {c.id for c in client.containers.list(
            all=True, filters={"label": "dlbs.test=sweep"})}
        assert left == {made[1].id}
    finally:
        for container in made:
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - removed by the sweep: what was wanted
                pass

