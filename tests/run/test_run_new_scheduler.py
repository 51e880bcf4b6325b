"""A new scheduler is one target class plus its registry entries: the run loop is unchanged.

The scheduler here is a real one of this host's own: each job a background process in a
session of its own, its output appended to the attempt's log. Registered for the test only
(`@register_target`, `@register_scheduler`), it runs a planned sweep through `Sweep` as the
SLURM target does: submitted in the groups it says, followed by one `poll` per look, past
its timeout cancelled and recorded `timeout`, its outcomes judged and recorded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from dlbs.cli.run import LineReporter
from dlbs.plan.plan_file import read_plan
from dlbs.recipes import BatchRequest, Invocation, schedulers
from dlbs.recipes import register_scheduler as register_request
from dlbs.run.flight import follow
from dlbs.run.loop import Sweep
from dlbs.run.outcome import CANCELLED, Outcome
from dlbs.run.targets import JobState, SchedulerTarget, base, register_target
from dlbs.run.targets.process import outcome_from_returncode
from tests.run.conftest import attempts

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=1", "-P", "exp.num_warmup_batches=0",
         "-P", "dummy.sleep=0"]


@dataclass
class _Job:
    process: subprocess.Popen[bytes]
    started: float
    cancelled: bool = False


class BackgroundJobs(SchedulerTarget):
    """Jobs as background processes of this host; all of a sweep's go as one submission."""

    summary = "background processes (a test's scheduler)"
    display_name = "BG"
    job_word = "BG job"
    poll_min = 0.05
    poll_max = 0.2

    def __init__(self) -> None:
        self.jobs: dict[str, _Job] = {}
        self.names: dict[str, list[str]] = {}
        self.submissions: list[int] = []

    def preflight(self, invocations: Sequence[Invocation]) -> None:
        return None

    def describe(self, invocation: Invocation) -> dict[str, Any]:
        return {"target": self.name, "argv": list(invocation.argv)}

    def groups(self, invocations: Sequence[Invocation]) -> list[list[int]]:
        return [list(range(len(invocations)))] if invocations else []

    def submit_many(self, entries: Sequence[tuple[Invocation, str]], name: str) -> list[str]:
        self.submissions.append(len(entries))
        self.names[name] = [self.submit(invocation, log) for invocation, log in entries]
        return self.names[name]

    def submit(self, invocation: Invocation, log_path: str, name: str | None = None) -> str:
        with open(log_path, "ab") as log:
            process = subprocess.Popen(invocation.argv, stdout=log, stderr=subprocess.STDOUT,
                                       env={**os.environ, **invocation.env},
                                       cwd=invocation.workdir, start_new_session=True)
        job_id = str(len(self.jobs) + 1)
        self.jobs[job_id] = _Job(process, time.monotonic())
        return job_id

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobState]:
        states = {}
        for job_id in job_ids:
            job = self.jobs[job_id]
            if job.process.poll() is None:
                states[job_id] = JobState("RUNNING", running=True,
                                          run_seconds=time.monotonic() - job.started)
            else:
                states[job_id] = JobState("DONE", final=True)
        return states

    def final_outcome(self, job_id: str, seen: JobState | None = None) -> Outcome:
        job = self.jobs[job_id]
        code = job.process.wait()
        if job.cancelled:
            return Outcome(CANCELLED, f"BG job {job_id} cancelled", code)
        return outcome_from_returncode(code, f"BG job {job_id}")

    def cancel(self, job_id: str) -> None:
        job = self.jobs[job_id]
        job.cancelled = True
        try:
            os.killpg(job.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def find_submitted(self, name: str, index: int | None) -> str | None:
        found = self.names.get(name, [])
        return found[index or 0] if found else None

    def wait(self, job_id: str, timeout: float | None) -> Outcome:
        return follow(self, job_id, timeout)


@pytest.fixture
def background_scheduler(monkeypatch):
    """`exp.scheduler: bg` selects BackgroundJobs, for this test only."""
    base.targets()
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.setattr(schedulers, "_REGISTRY", dict(schedulers.schedulers()))
    register_target("bg")(BackgroundJobs)
    register_request("bg")(lambda experiment, invocation: BatchRequest())
    opened: list[BackgroundJobs] = []
    monkeypatch.setattr(BackgroundJobs, "__init__", _recording_init(opened))
    yield opened
    for target in opened:
        for job in target.jobs.values():
            if job.process.poll() is None:
                os.killpg(job.process.pid, signal.SIGKILL)
                job.process.wait()


def _recording_init(opened: list[BackgroundJobs]) -> Any:
    original = BackgroundJobs.__init__

    def init(self: BackgroundJobs) -> None:
        original(self)
        opened.append(self)

    return init


def test_a_sweep_runs_through_a_new_scheduler(run_dlbs, tmp_path, monkeypatch,
                                              background_scheduler):
    planned = run_dlbs("plan", *DUMMY, "-P", "exp.timeout=3", "-V",
                       'dummy.fail=["", "hang"]', "-V", "exp.replica_batch=[1, 2]",
                       "-o", "plan.json")
    assert planned.returncode == 0, planned.stderr
    monkeypatch.chdir(tmp_path)
    experiments = read_plan(str(tmp_path / "plan.json"))
    for experiment in experiments:
        experiment["exp.scheduler"] = "bg"
    summary = Sweep(experiments, LineReporter()).run()
    assert summary.counts == {"ok": 2, "timeout": 2}, summary
    (target,) = background_scheduler
    assert target.submissions == [4]  # one submission of the group it asked for
    rows = attempts(tmp_path / "logs" / "results.db")
    by_status: dict[str, list[str]] = {}
    for _, _, status, message in rows:
        by_status.setdefault(status, []).append(message)
    assert sorted(by_status) == ["ok", "timeout"]
    for message in by_status["timeout"]:
        assert message.startswith("BG job ") and message.endswith(
            "still running after the timeout of 3 s; cancelled")
    assert all(job.process.poll() is not None for job in target.jobs.values())
