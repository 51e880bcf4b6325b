"""Which SLURM jobs a `dlbs run` re-attaches to, and may cancel (issue 34, defect 2).

An open attempt is a row of a results store: whoever can write to the store wrote it. A
later run re-attaches to (and on Ctrl-C cancels) the job a row names only when SLURM says the
job is the attempt's: called as the attempt's submission (`dlbs-<experiment>-<token>`), this
user's, its batch script running the attempt's experiment. Any other is left alone, and the
run says why. On the real two-node test cluster; the foreign jobs are held, so that they wait
in the queue without taking a node.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.run.conftest import wait_until

pytestmark = pytest.mark.slurm

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.scheduler=slurm", "-P", "exp.num_batches=2",
         "-P", "exp.num_warmup_batches=0", "-P", "dummy.sleep=1",
         "-P", "slurm.on_interrupt=keep"]


def _rows(db: Path) -> list[tuple]:
    """(exp_id, attempt, status, status_msg, job_id) of every attempt, oldest first."""
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT exp_id, attempt, status, status_msg, job_id FROM "
                                "attempts ORDER BY started_at, exp_id").fetchall()
    except sqlite3.Error:
        return []


def _set_job_id(db: Path, exp_id: str, job_id: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE attempts SET job_id = ? WHERE exp_id = ?", (job_id, exp_id))


def _held_job(name: str, *other_user: str) -> str:
    """A job dlbs never submitted, held in the queue (never started), called `name`."""
    done = subprocess.run(["sbatch", "--parsable", "--hold", "-J", name, "-D", "/tmp",
                           "-o", "/dev/null", *other_user, "--wrap", "sleep 600"],
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip().split(";")[0]


def _state(job_id: str) -> str:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True,
                         text=True, timeout=60).stdout.strip()
    return out or "GONE"


def _open_attempts(tmp_path: Path, count: int, *more: str) -> list[tuple]:
    """A sweep of `count` experiments left queued or running (a SIGHUP with keep)."""
    batches = ", ".join(str(b) for b in range(1, count + 1))
    sweep = subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "run", *DUMMY, *more,
                              "-V", f"exp.replica_batch=[{batches}]"], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    db = tmp_path / "logs" / "results.db"
    wait_until(lambda: sum(1 for r in _rows(db) if r[4] and not r[4].startswith("pending:"))
               == count, "the jobs were not submitted")
    sweep.send_signal(signal.SIGHUP)
    _, err = sweep.communicate(timeout=180)
    assert sweep.returncode == 129, err
    return _rows(db)


def test_only_the_attempts_own_job_is_re_attached(run_dlbs, tmp_path, slurm_cluster):
    rows = _open_attempts(tmp_path, 6)
    db = tmp_path / "logs" / "results.db"
    ids = [row[0] for row in rows]
    array_job, _, array_name = rows[0][4].partition(" ")
    array_id = array_job.split("_")[0]
    task_of = {row[0]: row[4].split(" ")[0] for row in rows}
    foreign = _held_job("not-dlbs")
    named_like_ours = _held_job(array_name, "--uid=65534", "--gid=65534")
    pending_name = f"dlbs-{ids[5]}-0123abcd"
    nobodys_pending = _held_job(pending_name, "--uid=65534", "--gid=65534")
    try:
        # Row 0: a job dlbs never submitted, as an older dlbs recorded ids (no name).
        _set_job_id(db, ids[0], foreign)
        # Row 1: the same job, with a name in dlbs's form that the job does not have.
        _set_job_id(db, ids[1], f"{foreign} {array_name}")
        # Row 2: another user's job, named as this sweep's array.
        _set_job_id(db, ids[2], f"{named_like_ours} {array_name}")
        # Row 3: this sweep's own array, but the task of another experiment (row 4's).
        _set_job_id(db, ids[3], f"{task_of[ids[4]]} {array_name}")
        # Row 5: a submission whose answer was never recorded, named as another user's job.
        _set_job_id(db, ids[5], f"pending:{pending_name}:")
        # Row 4 keeps its own job: the one re-attached.
        again = run_dlbs("run", *DUMMY, "-V", "exp.replica_batch=[1, 2, 3, 4, 5, 6]",
                         timeout=300)
        assert again.returncode == 0, again.stderr
        err = again.stderr
        assert f"re-attaching to SLURM job {task_of[ids[4]]} of experiment {ids[4]}" in err
        assert err.count("dlbs: re-attaching to SLURM job") == 1, err
        reasons = {
            ids[0]: f"SLURM job {foreign} of experiment {ids[0]}: the attempt recorded no "
                    "submission name with its job id",
            ids[1]: f"SLURM job {foreign} of experiment {ids[1]}: job {foreign} is called "
                    f"'not-dlbs', not '{array_name}' as this attempt's submission",
            ids[2]: f"SLURM job {named_like_ours} of experiment {ids[2]}: job "
                    f"{named_like_ours} is nobody(65534)'s, not this user's",
            ids[3]: f"SLURM job {task_of[ids[4]]} of experiment {ids[3]}: job "
                    f"{task_of[ids[4]]} runs experiment {ids[4]}, not {ids[3]}",
        }
        for exp_id, reason in reasons.items():
            assert f"not re-attaching to {reason}" in err, (exp_id, err)
        after = _rows(db)
        first = {row[0]: row for row in after if row[1] == 1}
        for exp_id, reason in reasons.items():
            assert first[exp_id][2] == "interrupted"
            assert reason.split(": ", 1)[1] in first[exp_id][3]
        # The lost submission: SLURM knows no job of this user's by that name.
        assert first[ids[5]][2] == "interrupted"
        assert "does not know it" in first[ids[5]][3]
        assert first[ids[4]][2] == "ok"  # its own job, followed to its end
        # Every experiment ran to the end, the ones not re-attached in a new attempt.
        latest = {row[0]: row[2] for row in after}
        assert set(latest.values()) == {"ok"}
        assert sorted(row[0] for row in after if row[1] == 2) == sorted(
            ids[:4] + [ids[5]])
        # The jobs not adopted were left alone: still held in the queue.
        for job_id in (foreign, named_like_ours, nobodys_pending):
            assert _state(job_id) == "PENDING"
        assert array_id
    finally:
        subprocess.run(["scancel", foreign, named_like_ours, nobodys_pending], timeout=60,
                       check=False)


def test_a_ctrl_c_cancels_only_the_adopted_jobs(tmp_path, slurm_cluster):
    longer = ("-P", "exp.num_batches=60")  # a minute: still running when the next run stops
    rows = _open_attempts(tmp_path, 2, *longer)
    db = tmp_path / "logs" / "results.db"
    own = rows[1][4].split(" ")[0]
    foreign = _held_job("not-dlbs")
    try:
        _set_job_id(db, rows[0][0], f"{foreign} {rows[0][4].split(' ')[1]}")
        sweep = subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "run", *DUMMY,
                                  *longer, "-P", "slurm.on_interrupt=cancel",
                                  "-V", "exp.replica_batch=[1, 2]"], cwd=tmp_path,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
        wait_until(lambda: sum(1 for r in _rows(db) if r[1] == 2 and r[4] and
                               not r[4].startswith("pending:")) == 1,
                   "the experiment not re-attached was not submitted again")
        sweep.send_signal(signal.SIGINT)
        _, err = sweep.communicate(timeout=180)
        assert sweep.returncode == 130, err
        assert f"not re-attaching to SLURM job {foreign} of experiment {rows[0][0]}" in err
        assert f"re-attaching to SLURM job {own} of experiment {rows[1][0]}" in err
        assert _state(foreign) == "PENDING"  # never adopted, so never cancelled
        wait_until(lambda: _state(own) in ("CANCELLED", "GONE"),
                   "the adopted job was not cancelled", limit=60)
    finally:  # and the job row 0 was submitted as, which no run follows now
        subprocess.run(["scancel", foreign, rows[0][4].split(" ")[0]], timeout=60,
                       check=False)
