"""A sweep in flight on the real two-node SLURM cluster.

Kill -9 and resume, interrupts, the remembered out-of-memory limit, sbatch's submit limits
and the cluster workflow's parameters.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.run.conftest import attempts

pytestmark = pytest.mark.slurm

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.scheduler=slurm", "-P", "exp.num_batches=2",
         "-P", "exp.num_warmup_batches=0"]


def _background(tmp_path: Path, *args: str, env: dict[str, str] | None = None
                ) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "run", *args],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env={**os.environ, **(env or {})})


def _rows(db: Path) -> list[tuple]:
    """(exp_id, attempt, status, job_id) of every attempt; [] while there is no database.

    The job id as SLURM gives it: the column also holds the submission's name after it
    (`<job id> dlbs-<experiment>-<token>`), or is a pending submission's mark.
    """
    try:
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT exp_id, attempt, status, job_id FROM attempts "
                                "ORDER BY started_at").fetchall()
    except sqlite3.Error:
        return []
    return [(*row[:3], row[3] if not row[3] or row[3].startswith("pending:")
             else row[3].split(" ")[0]) for row in rows]


def _wait_until(condition, what: str, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _progress(stderr: str) -> list[tuple[int, int]]:
    """The `[done/total]` of every progress line."""
    return [(int(done), int(total)) for done, total in
            re.findall(r"^\[(\d+)/(\d+)\] ", stderr, flags=re.MULTILINE)]


def _counts_right(stderr: str) -> bool:
    """Every progress line counts up to a total it never passes (issue 14, defect 20)."""
    progress = _progress(stderr)
    return bool(progress) and all(1 <= done <= total for done, total in progress) and \
        [done for done, _ in progress] == list(range(1, len(progress) + 1))


def _jobs_of(folder: Path) -> list[dict[str, str]]:
    """Every job (array task) the controller knows that ran in `folder`: one per submission."""
    out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True,
                         timeout=60).stdout
    jobs = []
    for line in out.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if fields.get("WorkDir") == str(folder):
            jobs.append(fields)
    return jobs


def _states(job_ids: list[str]) -> dict[str, str]:
    out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(job_ids),
                          "-o", "%i %T"], capture_output=True, text=True, timeout=60).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def test_kill_9_mid_sweep_then_resume_submits_nothing_twice(run_dlbs, tmp_path, slurm_cluster):
    spec = [*DUMMY, "-P", "dummy.sleep=1.5", "-P", "slurm.exclusive=true",
            "-P", "slurm.max_in_flight=2", "-V", "exp.replica_batch=[1, 2, 3, 4, 5, 6]"]
    sweep = _background(tmp_path, *spec)
    db = tmp_path / "logs" / "results.db"

    def mid_sweep() -> bool:  # one ended, one in flight with its job id, some not submitted
        rows = _rows(db)
        return (any(r[2] == "ok" for r in rows) and len(rows) < 6 and
                any(r[2] is None and r[3] and not r[3].startswith("pending:") for r in rows))

    _wait_until(mid_sweep, "the sweep never had a job ended and another in flight")
    os.killpg(sweep.pid, signal.SIGKILL)
    sweep.communicate()
    before = _rows(db)
    in_flight = [r for r in before if r[2] is None]
    assert in_flight and len(before) < 6
    result = run_dlbs("run", *spec, timeout=300)
    assert result.returncode == 0, result.stderr
    for exp_id, _, _, job_id in in_flight:
        if not job_id.startswith("pending:"):
            assert f"re-attaching to SLURM job {job_id} of experiment {exp_id}" in result.stderr
    after = _rows(db)
    # Every experiment ran once, in one attempt, by one job: nothing was submitted twice.
    assert sorted((r[1], r[2]) for r in after) == [(1, "ok")] * 6
    assert len({r[3] for r in after}) == 6
    assert len(_jobs_of(tmp_path)) == 6
    assert "6 ok" not in result.stderr  # the first run's experiments are not counted again
    assert "unchanged" in result.stderr
    assert _counts_right(result.stderr), result.stderr
    assert _progress(result.stderr)[-1] == (6, 6)


def test_sigterm_cancels_the_jobs_in_flight(tmp_path, slurm_cluster):
    sweep = _background(tmp_path, *DUMMY, "-P", "dummy.fail=hang",
                        "-V", "exp.replica_batch=[1, 2]")
    db = tmp_path / "logs" / "results.db"
    _wait_until(lambda: sum(1 for r in _rows(db) if r[3] and ":" not in r[3]) == 2,
                "the jobs were not submitted")
    job_ids = [r[3] for r in _rows(db)]
    os.killpg(sweep.pid, signal.SIGTERM)
    _, err = sweep.communicate(timeout=180)
    assert sweep.returncode == 143, err
    assert "(interrupted by SIGTERM)" in err
    rows = _rows(db)
    assert [r[2] for r in rows] == ["interrupted", "interrupted"], rows
    # Cancelled: nothing of the sweep is queued or running (a task cancelled while pending
    # leaves the queue at once, the others show CANCELLED).
    assert set(_states(job_ids).values()) <= {"CANCELLED"}


def test_sighup_with_keep_leaves_the_jobs_for_the_next_run(run_dlbs, tmp_path, slurm_cluster):
    spec = [*DUMMY, "-P", "dummy.sleep=2", "-P", "slurm.on_interrupt=keep",
            "-V", "exp.replica_batch=[1, 2]"]
    sweep = _background(tmp_path, *spec)
    db = tmp_path / "logs" / "results.db"
    _wait_until(lambda: sum(1 for r in _rows(db) if r[3] and ":" not in r[3]) == 2,
                "the jobs were not submitted")
    os.killpg(sweep.pid, signal.SIGHUP)
    _, err = sweep.communicate(timeout=180)
    assert sweep.returncode == 129, err
    assert "2 SLURM job(s) left queued or running (slurm.on_interrupt: keep)" in err
    assert [r[2] for r in _rows(db)] == [None, None]  # open, with their job ids
    again = run_dlbs("run", *spec, timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("re-attaching to SLURM job") == 2
    assert sorted((r[1], r[2]) for r in _rows(db)) == [(1, "ok"), (1, "ok")]
    assert _progress(again.stderr) == [(1, 2), (2, 2)], again.stderr


SLOW_SBATCH = """#!/bin/sh
# sbatch, held back until the test says go: a Ctrl-C can come while it runs.
touch '{started}'
while [ ! -e '{go}' ]; do sleep 0.05; done
exec {sbatch} "$@"
"""


def test_a_ctrl_c_of_the_terminal_never_kills_sbatch_half_way(tmp_path, slurm_cluster):
    bin_dir, started, go = tmp_path / "bin", tmp_path / "started", tmp_path / "go"
    bin_dir.mkdir()
    wrapper = bin_dir / "sbatch"
    wrapper.write_text(SLOW_SBATCH.format(started=started, go=go,
                                          sbatch=shutil.which("sbatch")))
    wrapper.chmod(0o755)
    sweep = _background(tmp_path, *DUMMY, "-P", "dummy.sleep=2",
                        env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    try:
        _wait_until(started.exists, "sbatch was not called")
        # A terminal's Ctrl-C goes to its whole foreground group: dlbs and its children.
        os.killpg(sweep.pid, signal.SIGINT)
    finally:
        go.touch()
    _, err = sweep.communicate(timeout=180)
    assert sweep.returncode == 130, err
    ((_, _, status, job_id),) = _rows(tmp_path / "logs" / "results.db")
    # sbatch went on and submitted; dlbs then cancelled the job it knows of.
    assert status == "interrupted", err
    assert job_id and job_id.isdigit()
    assert set(_states([job_id]).values()) <= {"CANCELLED"}



def test_out_of_memory_cancels_the_queued_larger_batches(run_dlbs, tmp_path, slurm_cluster):
    oom = '{"condition": {"exp.replica_batch": 8}, "parameters": {"dummy.fail": "oom"}}'
    result = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=3", "-P", "slurm.exclusive=true",
                      "-V", "exp.replica_batch=[8, 16, 32, 64]", "-E", oom, timeout=300)
    assert result.returncode == 1, result.stderr
    with sqlite3.connect(tmp_path / "logs" / "results.db") as conn:
        rows = conn.execute("SELECT json_extract(params, '$.\"exp.replica_batch\"'), status, "
                            "status_msg FROM attempts").fetchall()
    by_batch = {batch: (status, message) for batch, status, message in rows}
    assert by_batch[8][0] == "failure" and "out of memory" in by_batch[8][1]
    # 16 runs beside 8 on the other node. When 8 fails, SLURM may start 32 on its node before
    # dlbs looks (a running job is left to end); 64 waits behind 16 and is cancelled.
    assert by_batch[16][0] == "ok" and by_batch[32][0] in ("ok", "skipped")
    status, message = by_batch[64]
    assert status == "skipped" and "which ran out of memory" in message, message
    assert "was cancelled" in message
    assert "cancelled" in result.stderr and "queued job(s) of larger batches" in result.stderr


def test_a_job_past_its_timeout_is_cancelled_and_the_sweep_goes_on(run_dlbs, tmp_path,
                                                                    slurm_cluster):
    result = run_dlbs("run", *DUMMY, "-P", "exp.timeout=3", "-P", "dummy.sleep=0",
                      "-V", 'dummy.fail=["hang", ""]', timeout=300)
    assert result.returncode == 1, result.stderr
    rows = attempts(tmp_path / "logs" / "results.db")
    by_status = {row[2]: row[3] for row in rows}
    assert set(by_status) == {"timeout", "ok"}
    assert "still running after the timeout of 3 s; cancelled" in by_status["timeout"]


@pytest.mark.parametrize(("never_starts", "reason"), [
    ("--hold", "JobHeldUser"),               # held: it waits until released, for ever here
    ("--begin=now+3600", "BeginTime"),       # not before an hour from now
])
def test_a_job_that_never_starts_is_cancelled_after_its_queue_timeout(run_dlbs, tmp_path,
                                                                      slurm_cluster,
                                                                      never_starts, reason):
    # exp.timeout counts the run time only: the queue is slurm.queue_timeout's.
    began = time.monotonic()
    result = run_dlbs("run", *DUMMY, "-P", "exp.timeout=3", "-P", "slurm.queue_timeout=2",
                      "-P", f'slurm.extra_args=["{never_starts}"]', "-P", "dummy.sleep=0",
                      "-V", "exp.replica_batch=[1, 2]", timeout=300)
    assert result.returncode == 1, result.stderr
    assert time.monotonic() - began < 60
    rows = _rows(tmp_path / "logs" / "results.db")
    assert [row[2] for row in rows] == ["timeout", "timeout"]
    for row in attempts(tmp_path / "logs" / "results.db"):
        assert row[3].startswith("SLURM job ") and row[3].endswith(
            f" still queued (PENDING, reason {reason}) after its queue timeout of 2 s; "
            "cancelled"), row[3]
    assert set(_states([row[3] for row in rows]).values()) <= {"CANCELLED"}


def test_a_re_attached_job_counts_its_queue_time_from_its_attempts_start(run_dlbs, tmp_path,
                                                                        slurm_cluster):
    spec = [*DUMMY, "-P", 'slurm.extra_args=["--hold"]', "-P", "slurm.on_interrupt=keep"]
    sweep = _background(tmp_path, *spec)
    db = tmp_path / "logs" / "results.db"
    _wait_until(lambda: sum(1 for r in _rows(db) if r[3] and ":" not in r[3]) == 1,
                "the job was not submitted")
    time.sleep(3)
    os.killpg(sweep.pid, signal.SIGHUP)
    _, err = sweep.communicate(timeout=180)
    assert sweep.returncode == 129, err
    # The next run allows 2 s in the queue: the job has waited longer since its attempt
    # began, so it is cancelled at the first look.
    again = run_dlbs("run", *spec, "-P", "slurm.queue_timeout=2", timeout=300)
    assert again.returncode == 1, again.stderr
    assert "re-attaching to SLURM job" in again.stderr
    ((_, _, status, message),) = attempts(db)
    assert status == "timeout" and "after its queue timeout of 2 s; cancelled" in message


def test_without_a_queue_timeout_a_held_job_waits(tmp_path, slurm_cluster):
    sweep = _background(tmp_path, *DUMMY, "-P", 'slurm.extra_args=["--hold"]')
    db = tmp_path / "logs" / "results.db"
    try:
        _wait_until(lambda: sum(1 for r in _rows(db) if r[3] and ":" not in r[3]) == 1,
                    "the job was not submitted")
        time.sleep(3)
        assert sweep.poll() is None and [r[2] for r in _rows(db)] == [None]
    finally:
        os.killpg(sweep.pid, signal.SIGTERM)
        sweep.communicate(timeout=180)
    assert [r[2] for r in _rows(db)] == ["interrupted"]


FAKE_LIMIT = r"""#!/bin/sh
# A QOS submit limit, as SLURM refuses it (it needs accounting storage, which the test
# cluster has not): at most {limit} jobs (array tasks count one each) of this folder queued
# or running. The script is sbatch's last argument.
for script; do :; done
last=$(sed -n 's/^#SBATCH --array=0-\([0-9]*\)$/\1/p' "$script")
size=$(( ${{last:--1}} + 1 ))
n=$(squeue -h -r -t PENDING,CONFIGURING,RUNNING,COMPLETING -o '%Z' | grep -cx '{folder}')
if [ $((n + size)) -gt {limit} ]; then
    reason="Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
    echo "sbatch: error: Batch job submission failed: $reason" >&2
    exit 1
fi
exec {sbatch} "$@"
"""


def test_a_submit_limit_is_waited_out(run_dlbs, tmp_path, slurm_cluster):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "sbatch"
    wrapper.write_text(FAKE_LIMIT.format(limit=2, folder=tmp_path, sbatch=shutil.which("sbatch")))
    wrapper.chmod(0o755)
    result = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=1", "-V",
                      "exp.replica_batch=[1, 2, 3, 4, 5]", timeout=300,
                      env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert result.returncode == 0, result.stderr
    assert "job submit limit" in result.stderr and "wait for room" in result.stderr
    assert sorted(r[2] for r in attempts(tmp_path / "logs" / "results.db")) == ["ok"] * 5
    assert len(_jobs_of(tmp_path)) == 5


def test_the_cluster_workflow_runs_from_parameters(run_dlbs, tmp_path, slurm_cluster):
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    prologue = textwrap.dedent(f"""
        echo "prologue on $SLURMD_NODENAME cpus=$SLURM_CPUS_PER_TASK"
        test -d {wheelhouse}
    """).strip().splitlines()
    result = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=0", "-P", "slurm.cpus_per_task=2",
                      "-P", "slurm.mem=100M", "-P", "slurm.exclusive=true",
                      "-P", f"slurm.prologue={json.dumps(prologue)}")
    assert result.returncode == 0, result.stderr
    (log,) = (tmp_path / "logs").glob("*.log")
    text = log.read_text()
    assert "prologue on node1 cpus=2" in text
    script = Path(str(log) + ".sbatch").read_text()
    for line in ("#SBATCH --cpus-per-task=2", "#SBATCH --mem=100M", "#SBATCH --exclusive"):
        assert line in script.splitlines()
    failing = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=0", "-P", "exp.model=other",
                       "-P", 'slurm.prologue=["false"]')
    assert failing.returncode == 1
    assert "slurm.prologue failed" in "".join(
        p.read_text() for p in (tmp_path / "logs").glob("*other*.log"))


def test_a_job_script_that_cannot_be_written_is_a_recorded_failure(run_dlbs, tmp_path,
                                                                   slurm_cluster):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "blocked.log.sbatch").mkdir()  # where the job script would go
    result = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=0", "-V", 'exp.model=["a", "b"]',
                      "-E", '{"condition": {"exp.model": "a"}, "parameters": '
                            '{"exp.log_file": "logs/blocked.log", "slurm.mem": "100M"}}',
                      timeout=300)  # a request of its own: a job of its own, not an array
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    by_status = {row[2]: row[3] for row in attempts(tmp_path / "logs" / "results.db")}
    assert set(by_status) == {"failure", "ok"}  # the sweep went on
    assert by_status["failure"].startswith(
        f"could not start: cannot write {tmp_path}/logs/blocked.log.sbatch: it is a folder")
