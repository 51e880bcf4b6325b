"""The interface of a batch scheduler: submit many, poll many, final outcome, cancel, re-attach.

A `SchedulerTarget` hands invocations to a scheduler and tracks them by job id; the run loop
drives every scheduler through these methods alone (`dlbs.run.flight` follows the jobs in
flight), never through a concrete one (like reframe's `JobScheduler.poll(*jobs)`):
- `groups` says which invocations may go as one submission (a SLURM job array), and
  `submit_many` submits one group under a name unique to it, one job id per invocation;
- `poll` looks at many jobs at once, `final_outcome` tells how one that ended ended;
- `cancel` cancels one job, queued or running;
- re-attaching is polling a job id recorded by an earlier `dlbs run`: any id the scheduler
  gave works from any process, once `adoption` has said that the scheduler's job is the
  attempt's (its name, its user, its experiment: a row of a shared store could name any
  job). `find_submitted` finds a submission by its name, among this user's jobs, when dlbs
  died between the scheduler's answer and its own record of it.
A scheduler is one module in `dlbs/run/targets/` (`@register_target(name)`, listed in
`BUILTIN_TARGETS`) plus the reader of its request in `dlbs/recipes/schedulers.py`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from dlbs.errors import LaunchError
from dlbs.recipes.invocation import Invocation
from dlbs.run.outcome import Outcome
from dlbs.run.targets.base import Target


class SubmitLimit(LaunchError):
    """The scheduler refused a submission because a submit limit is reached: retry later."""


@dataclass(frozen=True)
class JobState:
    """A job's state as one look at the scheduler saw it.

    `state` and `reason` are the scheduler's own words; `queued`, `running` and `final` say
    which part of its life the job is in (neither of the three: starting, suspended, ending);
    `hopeless`: queued for a reason the cluster, as configured, can never satisfy.
    """

    state: str
    reason: str = ""
    run_seconds: float = 0.0
    queued: bool = False
    running: bool = False
    final: bool = False
    hopeless: bool = False


#: The state of a job just submitted, until the first look at it.
SUBMITTED = JobState("SUBMITTED", queued=True)


class SchedulerTarget(Target):
    """A target that hands invocations to a batch scheduler; see the module doc."""

    #: How messages name the scheduler ("SLURM does not know it") and one of its jobs
    #: ("SLURM job 42").
    display_name: ClassVar[str] = "the scheduler"
    job_word: ClassVar[str] = "job"
    #: Seconds between two looks at the jobs: from `poll_min`, growing to `poll_max`.
    poll_min: ClassVar[float] = 0.2
    poll_max: ClassVar[float] = 2.0
    #: How long the scheduler may fail to answer before the jobs are given up.
    controller_patience: float = 120.0
    #: How long a job may stay `hopeless` before it is cancelled and reported as a failure
    #: (the reason can be transient: nodes down).
    hopeless_after: float = 60.0

    def groups(self, invocations: Sequence[Invocation]) -> list[list[int]]:
        """Which invocations may go as one submission (indexes, in order); alone by default."""
        return [[index] for index in range(len(invocations))]

    def submit_many(self, entries: Sequence[tuple[Invocation, str]], name: str) -> list[str]:
        """Submit one group of `groups` (invocation, log path) as one submission named `name`.

        Returns one job id per entry, in order. `SubmitLimit` when the scheduler refuses it for
        a submit limit (the loop retries later), `LaunchError` for any other refusal.
        """
        if len(entries) != 1:
            raise LaunchError(f"{self.name} submits one experiment at a time, not "
                              f"{len(entries)}")
        invocation, log_path = entries[0]
        return [self.submit(invocation, log_path, name)]

    @abc.abstractmethod
    def submit(self, invocation: Invocation, log_path: str, name: str | None = None) -> str:
        """Submit the invocation as a job whose output is appended to `log_path`; its id.

        `name`, when given, is the job's name: unique, so that the job can be found by it.
        """

    @abc.abstractmethod
    def poll(self, job_ids: Sequence[str]) -> dict[str, JobState]:
        """One look at many jobs: the state of each job the scheduler still knows.

        A job missing from the answer has ended long ago (`final_outcome` tells how).
        `LaunchError` when the scheduler does not answer.
        """

    @abc.abstractmethod
    def final_outcome(self, job_id: str, seen: JobState | None = None) -> Outcome:
        """How a job that ended (or that the scheduler forgot) ended; `seen`: its last state."""

    @abc.abstractmethod
    def cancel(self, job_id: str) -> None:
        """Ask the scheduler to cancel the job (queued or running); no error if it ended."""

    @abc.abstractmethod
    def find_submitted(self, name: str, index: int | None) -> str | None:
        """The job id of entry `index` of the submission called `name` (None: its only one).

        None when the scheduler knows no such submission: it never took it.
        """

    def adoption(self, job_id: str, name: str, exp_id: str) -> str | None:
        """Why job `job_id` is not the attempt's to re-attach to or cancel; None when it is.

        It is when the scheduler says the job is called `name` (the attempt's submission's:
        `dlbs.run.marks`), is this user's and runs experiment `exp_id`. A scheduler that
        cannot tell adopts nothing. `LaunchError` when the scheduler does not answer.
        """
        return f"{self.display_name} cannot tell whose job {job_id} is"

    @abc.abstractmethod
    def wait(self, job_id: str, timeout: float | None) -> Outcome:
        """Follow one job until it ends (or `timeout` seconds of its run time pass: cancel it).

        Works for any job id this target submitted, also from another process. A
        KeyboardInterrupt cancels the job and returns status interrupted. A scheduler
        implements it as `dlbs.run.flight.follow(self, job_id, timeout)`.
        """
