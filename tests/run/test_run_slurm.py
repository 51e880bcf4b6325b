"""`dlbs run` on the real two-node SLURM cluster (started by .ci/run)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from dlbs.results.protocol import parse_log
from tests.run.conftest import attempts

pytestmark = pytest.mark.slurm

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.scheduler=slurm", "-P", "exp.num_batches=2",
         "-P", "exp.num_warmup_batches=0"]


def test_dummy_sweep_as_slurm_jobs(run_dlbs, tmp_path, slurm_cluster):
    result = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=0", "-V", "exp.replica_batch=[1, 2]")
    assert result.returncode == 0, result.stderr
    assert [r[2] for r in attempts(tmp_path / "logs" / "results.db")] == ["ok", "ok"]
    for log in (tmp_path / "logs").glob("*.log"):
        assert parse_log(log).values["results.status"] == "ok"
        assert (tmp_path / "logs" / (log.name + ".sbatch")).exists()


@pytest.mark.pytorch
def test_two_node_pytorch_job(run_dlbs, tmp_path, slurm_cluster):
    result = run_dlbs("run", "-P", "exp.scheduler=slurm", "-P", "exp.num_nodes=2",
                      "-P", "exp.model=deep_mnist", "-P", "exp.replica_batch=8",
                      "-P", "exp.num_batches=3", "-P", "exp.num_warmup_batches=1",
                      timeout=400)
    assert result.returncode == 0, result.stderr
    (log,) = (tmp_path / "logs").glob("*.log")
    text = log.read_text()
    values = parse_log(log).values
    assert values["exp.num_replicas"] == 2 and values["exp.effective_batch"] == 16
    assert values["results.status"] == "ok" and values["results.throughput"] > 0
    # One result block for the whole job (rank 0), from two nodes.
    assert text.count("__results.throughput__") == 1
    assert "torch.distributed.run" in (tmp_path / "logs" / (log.name + ".sbatch")).read_text()


def _job_id(db) -> str | None:
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT job_id FROM attempts WHERE job_id IS NOT NULL").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def _wait_for_job(db) -> None:
    deadline = time.monotonic() + 60
    while _job_id(db) is None:
        assert time.monotonic() < deadline, "no job was submitted"
        time.sleep(0.1)


def test_kill_9_of_dlbs_reattaches_to_the_job(run_dlbs, tmp_path, slurm_cluster):
    spec = [*DUMMY, "-P", "dummy.sleep=2"]
    sweep = subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "run", *spec],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    db = tmp_path / "logs" / "results.db"
    _wait_for_job(db)
    job_id = _job_id(db)
    os.killpg(sweep.pid, signal.SIGKILL)
    sweep.communicate()
    result = run_dlbs("run", *spec)
    assert result.returncode == 0, result.stderr
    assert f"re-attaching to SLURM job {job_id}" in result.stderr
    # The same attempt ended: the job was not submitted twice.
    assert [r[1:3] for r in attempts(db)] == [(1, "ok")]


def test_cancelled_job_is_recorded_with_its_reason(run_dlbs, tmp_path, slurm_cluster):
    sweep = subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "run", *DUMMY,
                              "-P", "dummy.sleep=5", "-V", "exp.replica_batch=[1, 2]"],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    db = tmp_path / "logs" / "results.db"
    _wait_for_job(db)
    subprocess.run(["scancel", _job_id(db)], check=True)
    _, err = sweep.communicate(timeout=180)
    assert sweep.returncode == 1, err
    rows = attempts(db)
    assert [r[2] for r in rows] == ["cancelled", "ok"]
    assert "CANCELLED" in (rows[0][3] or "").upper()
