"""`dlbs run` on the real two-node SLURM cluster (started by .ci/run)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime

import pytest

from dlbs.results.protocol import parse_log
from dlbs.results.store import open_store
from tests.run.conftest import attempts

pytestmark = pytest.mark.slurm

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.scheduler=slurm", "-P", "exp.num_batches=2",
         "-P", "exp.num_warmup_batches=0"]


def test_dummy_sweep_as_one_job_array(run_dlbs, tmp_path, slurm_cluster):
    result = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=0", "-V", "exp.replica_batch=[1, 2]")
    assert result.returncode == 0, result.stderr
    assert [r[2] for r in attempts(tmp_path / "logs" / "results.db")] == ["ok", "ok"]
    logs = sorted((tmp_path / "logs").glob("*.log"))
    for log in logs:
        values = parse_log(log).values
        assert values["results.status"] == "ok"
        # The node monitor told where it ran; the record has it instead of the login node's.
        assert any(key.startswith("job.environment.node") for key in values)
    (script,) = (tmp_path / "logs").glob("dlbs-array-*.sbatch")  # same request: one array
    text = script.read_text()
    assert "#SBATCH --array=0-1" in text and all(log.name in text for log in logs)
    with sqlite3.connect(tmp_path / "logs" / "results.db") as conn:
        rows = conn.execute("SELECT job_id, environment FROM attempts").fetchall()
    # Each holds its array task's id and the array's name (what a later run checks before
    # it re-attaches to the task).
    assert all(re.fullmatch(r"[0-9]+_[01] dlbs-array-[0-9a-f]{8}", row[0]) for row in rows)
    assert len({row[0].split("_")[0] for row in rows}) == 1
    assert sorted(row[0].split(" ")[0].split("_")[1] for row in rows) == ["0", "1"]
    assert len({row[0].split(" ")[1] for row in rows}) == 1
    assert all(json.loads(row[1])["node"] in ("node1", "node2") for row in rows)
    # The node monitor read the energy at the marks by default (monitor.energy), or said
    # why it could not: no readable RAPL on the nodes of the test cluster.
    with open_store(str(tmp_path / "logs" / "results.db"), create=False) as store:
        for attempt in store.attempts():
            summary = attempt.summary
            assert summary.get("results.energy_source") == "rapl counter" or \
                summary["results.energy_unavailable"].startswith(("no RAPL counters",
                                                                  "RAPL counters not"))


def test_different_requests_go_as_separate_jobs(run_dlbs, tmp_path, slurm_cluster):
    result = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=0", "-V", 'slurm.time=["5", "6"]')
    assert result.returncode == 0, result.stderr
    logs = sorted((tmp_path / "logs").glob("*.log"))
    assert len(logs) == 2
    for log in logs:
        assert (tmp_path / "logs" / (log.name + ".sbatch")).exists()
    assert not list((tmp_path / "logs").glob("dlbs-array-*.sbatch"))


def _intervals(folder) -> list[tuple[datetime, datetime]]:
    spans = []
    for log in folder.glob("*.log"):
        values = parse_log(log).values
        spans.append((datetime.fromisoformat(values["results.start_time"]),
                      datetime.fromisoformat(values["results.end_time"])))
    return spans


def _most_at_once(spans) -> int:
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def test_sweep_in_flight_keeps_both_nodes_busy_and_monitors_inside_jobs(run_dlbs, tmp_path,
                                                                       slurm_cluster):
    # Six batches of 0.7 s: on a loaded machine the node monitor may start a second or two
    # into the job, and still takes at least five samples of the backend.
    result = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=0.7", "-P", "exp.num_batches=6",
                      "-P", "slurm.exclusive=true", "-P", "monitor.frequency=0.2",
                      "-P", "dummy.busy=true", "-V", "exp.replica_batch=[1, 2, 3, 4]")
    assert result.returncode == 0, result.stderr
    spans = _intervals(tmp_path / "logs")
    assert len(spans) == 4 and _most_at_once(spans) == 2  # exclusive jobs on two nodes
    with sqlite3.connect(tmp_path / "logs" / "results.db") as conn:
        rows = conn.execute("SELECT results FROM attempts").fetchall()
    for (text,) in rows:
        results = json.loads(text)
        cpu, clock = results["results.use.cpu"], results["results.use.time"]
        # The busy backend on its node (two of them and the tests share 2 cores: no bound on
        # how busy), on the attempt's clock: the first sample comes after the job started.
        assert len(cpu) == len(clock) >= 5 and max(cpu) > 5 and clock[0] > 0
        assert not any(key.startswith("job.") for key in results)


def test_max_in_flight_limits_the_jobs_at_once(run_dlbs, tmp_path, slurm_cluster):
    result = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=0.5", "-P", "slurm.max_in_flight=1",
                      "-V", "exp.replica_batch=[1, 2, 3]")
    assert result.returncode == 0, result.stderr
    assert _most_at_once(_intervals(tmp_path / "logs")) == 1


def test_whole_sweep_settings_must_not_vary(run_dlbs, tmp_path):
    result = run_dlbs("run", *DUMMY, "-V", "exp.replica_batch=[1, 2]", "-E",
                      '{"condition": {"exp.replica_batch": 2}, '
                      '"parameters": {"slurm.max_in_flight": 2}}')
    assert result.returncode == 2
    assert "slurm.max_in_flight applies to the whole sweep" in result.stderr
    both = run_dlbs("validate", *DUMMY, "-P", "slurm.gres=gpu:2", "-P", "exp.gpus=0")
    assert both.returncode != 0 and "slurm.gres and slurm.gpus_per_node" in both.stdout + \
        both.stderr


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


@pytest.mark.pytorch
@pytest.mark.slow
def test_two_node_transformer_job_shards_with_fsdp2(run_dlbs, tmp_path, slurm_cluster):
    # A tiny decoder over the two nodes: torchrun's rendezvous, gloo, FSDP2 across them.
    result = run_dlbs("run", "-P", "exp.scheduler=slurm", "-P", "exp.num_nodes=2",
                      "-P", "exp.model=llama3_debug", "-P", "exp.num_batches=2",
                      "-P", "exp.num_warmup_batches=1", "-P", "pytorch.num_threads=1",
                      timeout=400)
    assert result.returncode == 0, result.stderr
    (log,) = (tmp_path / "logs").glob("*.log")
    text = log.read_text()
    values = parse_log(log).values
    assert values["exp.num_replicas"] == 2 and values["pytorch.data_parallel"] == "fsdp"
    assert values["results.status"] == "ok"
    assert values["results.tokens_per_second"] == pytest.approx(
        values["results.throughput"] * 128)
    assert text.count("data_parallel=fsdp") == 2  # each node's rank built its shard
    assert text.count("__results.tokens_per_second__") == 1


def _job_id(db) -> str | None:
    try:
        with sqlite3.connect(db) as conn:
            # Not the mark of a submission in progress ("pending:<job name>:<index>").
            row = conn.execute("SELECT job_id FROM attempts WHERE job_id IS NOT NULL AND "
                               "job_id NOT LIKE 'pending:%' ORDER BY started_at").fetchone()
    except sqlite3.Error:
        return None
    return row[0].split(" ")[0] if row else None  # `<job id> <submission name>`


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
