"""Scheduling: start the plan's experiments as room allows, and finish each as it ends.

- Local and container experiments (`ProcessTarget`) run in worker threads (`dlbs.run.pool`),
  `runtime.max_parallel` at once on disjoint GPUs (one at a time by default).
- Scheduler experiments (`SchedulerTarget`) are submitted `slurm.max_in_flight` at a time
  (0: all), in the groups their scheduler takes as one submission (a SLURM job array), and
  followed together (`dlbs.run.flight`). A group refused for a submit limit is halved and
  tried again at once; a single experiment refused waits until a job ends or the back-off
  passes. Each attempt's submission name is recorded before the submission, so that a loop
  killed before the scheduler's answer is recorded still finds the job (`dlbs.run.resume`).
- An out-of-memory failure cancels the queued jobs that the out-of-memory rule
  (`policy.too_large`) now skips.
A stop request stops what runs and settles every attempt (`wind_down`).
A results store that fails while experiments run (a PostgreSQL server lost, a full disk)
stops nothing: no further experiment starts, those running or in flight end on their own
with complete logs (`dlbs results copy` records them later), then the store's error ends
the sweep (`Driver.lost_store`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dlbs.errors import LaunchError, OutputError, ResultsError
from dlbs.recipes import Invocation
from dlbs.run import marks, policy
from dlbs.run.flight import SKIP, Flight, Flights
from dlbs.run.follow import ProgressNote
from dlbs.run.interrupts import StopRequest
from dlbs.run.outcome import CANCELLED, INTERRUPTED, Outcome
from dlbs.run.pool import ProcessPool
from dlbs.run.recording import Attempt, Experiment, Recorder
from dlbs.run.targets import SchedulerTarget, SubmitLimit, Target
from dlbs.run.work import attempt_work, job_timeout, queue_timeout

NOT_SUBMITTED = "the sweep stopped before this experiment's job was submitted"


@dataclass
class Prepared:
    """A scheduler's attempt opened before, whose submission was refused for a limit."""

    attempt: Attempt

    @property
    def target(self) -> Target:
        return self.attempt.job.target

    @property
    def invocation(self) -> Invocation:
        return self.attempt.job.invocation


#: What waits for its turn: a job to start, an attempt refused for a limit, or a decision
#: to record when its turn comes (skipped).
Pending = deque[tuple[Experiment, Any]]


class Driver:
    """Runs the jobs of a sweep to their ends; see the module doc."""

    def __init__(self, recorder: Recorder, stop: StopRequest, max_parallel: int,
                 max_in_flight: int, on_interrupt: str) -> None:
        self.recorder = recorder
        self.reporter = recorder.reporter
        self.stop = stop
        self.pool = ProcessPool(max_parallel, on_report=self._report)
        self.max_in_flight = max_in_flight
        self.on_interrupt = on_interrupt
        #: The jobs in flight, by scheduler target name.
        self.flights: dict[str, Flights] = {}
        #: The first store write that failed while the sweep ran (see `_recorded`).
        self.lost_store: ResultsError | None = None

    def drive(self, pending: Pending, reattached: list[tuple[Attempt, str]]) -> None:
        """Start experiments as room allows and finish each as it ends, until all are done."""
        for attempt, job_id in reattached:
            self._flights(attempt.job.target).add(
                attempt, job_id, job_timeout(attempt.job), submitted=False,
                queue_timeout=queue_timeout(attempt.job),
                queued_for=time.time() - attempt.started_epoch)
        try:
            while ((pending and self.lost_store is None) or self.pool.running
                   or self._in_flight()):
                if self.stop.requested:
                    break
                self._start_ready(pending)
                self._collect()
        finally:
            if self.stop.requested or self.pool.running or self._in_flight():
                self.wind_down()
            for _, job in pending:  # opened, refused for a limit, never submitted
                if isinstance(job, Prepared):
                    self._recorded(self.recorder.finish, job.attempt,
                                   Outcome(INTERRUPTED, NOT_SUBMITTED))
        if self.lost_store is not None:
            raise self.lost_store

    def _recorded(self, write: Callable[..., Any], *args: Any) -> Any:
        """A write to a store while experiments run; None where the store failed.

        The first failure is kept in `lost_store` (and said at once): what runs goes on to
        its end, nothing more starts, and the error ends the sweep once nothing runs.
        """
        try:
            return write(*args)
        except ResultsError as error:
            self._lose_store(error)
            return None

    def _lose_store(self, error: ResultsError) -> None:
        if self.lost_store is None:
            self.lost_store = error
            self.reporter.note("a results store failed (its error follows when the sweep "
                               "ends): no further experiment starts; those running finish "
                               "and keep their logs")

    def _report(self, attempt: Attempt, value: Any) -> None:
        """A worker's report: its backend's progress note, or its process's mark."""
        if isinstance(value, ProgressNote):
            self.reporter.progress(attempt.job.experiment, value.text)
        else:
            self._recorded(self.recorder.mark, attempt, value)

    def _flights(self, target: Target) -> Flights:
        assert isinstance(target, SchedulerTarget)
        if target.name not in self.flights:
            self.flights[target.name] = Flights(target, self.max_in_flight)
        return self.flights[target.name]

    def _in_flight(self) -> int:
        return sum(flights.active for flights in self.flights.values())

    # -- starting ------------------------------------------------------------------------
    def _start_ready(self, pending: Pending) -> None:
        """One pass over the plan: start what may start now, in plan order."""
        self.pool.new_round()
        to_submit: dict[str, list[Attempt]] = {}
        room: dict[str, int] = {}
        kept: Pending = deque()
        while pending:
            experiment, job = pending.popleft()
            if self.stop.requested or self.lost_store is not None:
                kept.append((experiment, job))
                continue
            if isinstance(job, policy.Decision):  # skipped (a smaller batch ran out of memory)
                self._recorded(self.recorder.skipped, experiment, job.reason)
                continue
            if isinstance(job.target, SchedulerTarget):
                name = job.target.name
                if name not in room:
                    room[name] = self._flights(job.target).room()
                batch = to_submit.setdefault(name, [])
                if len(batch) >= room[name]:
                    kept.append((experiment, job))
                    continue
                attempt = (job.attempt if isinstance(job, Prepared)
                           else self._recorded(self.recorder.begin, job))
                if attempt is not None:
                    batch.append(attempt)
                continue
            gpus = job.invocation.gpus
            if not self.pool.can_start(gpus):
                self.pool.blocked(gpus)
                kept.append((experiment, job))
                continue
            attempt = self._recorded(self.recorder.begin, job)
            if attempt is not None:
                self.pool.start(attempt, gpus, attempt_work(attempt, self.stop.event))
        pending.extend(kept)
        for name, attempts in to_submit.items():
            refused = self._submit(attempts, self.flights[name])
            for attempt in reversed(refused):  # back to the front, in plan order
                pending.appendleft((attempt.job.experiment, Prepared(attempt)))

    def _submit(self, attempts: list[Attempt], flights: Flights) -> list[Attempt]:
        """Submit opened attempts in their scheduler's groups; those refused for a limit."""
        refused: list[Attempt] = []
        if self.stop.requested:  # opened just before the stop: never submitted
            for attempt in attempts:
                self.recorder.finish(attempt, Outcome(INTERRUPTED, NOT_SUBMITTED))
            return refused
        target = flights.target
        queue = [[attempts[i] for i in group]
                 for group in target.groups([a.job.invocation for a in attempts])]
        while queue:
            group = queue.pop(0)
            if refused:  # a limit was hit: what follows waits too
                refused += group
                continue
            try:
                job_ids, name = self._submit_group(group, target)
            except ResultsError as error:  # its pending names: nothing was submitted
                self._lose_store(error)
                refused += group
                continue
            except SubmitLimit as error:
                if len(group) > 1:  # perhaps the limit takes part of it: halves, at once
                    half = len(group) // 2
                    queue[:0] = [group[:half], group[half:]]
                    continue
                delay = flights.refused()
                refused += group
                waiting = len(refused) + sum(len(g) for g in queue)
                self.reporter.note(f"{error.message}; {waiting} experiment(s) wait for room "
                                   f"({flights.active} job(s) in flight; next try when one "
                                   f"ends, or in {delay:g} s)")
                continue
            except (LaunchError, OutputError) as error:  # OutputError: its job script
                for attempt in group:
                    self.recorder.finish(attempt, Outcome("failure", f"could not start: "
                                                                     f"{error.message}"))
                continue
            flights.accepted()
            for attempt, job_id in zip(group, job_ids):
                self._recorded(self.recorder.job_id, attempt, marks.submitted(job_id, name))
                flights.add(attempt, job_id, job_timeout(attempt.job),
                            queue_timeout=queue_timeout(attempt.job))
        return refused

    def _submit_group(self, group: list[Attempt], target: SchedulerTarget
                      ) -> tuple[list[str], str]:
        """Submit one group (its pending names are recorded first); its job ids and name."""
        name = marks.submission_name(group[0].job.invocation.label if len(group) == 1
                                     else None)
        for index, attempt in enumerate(group):
            self.recorder.job_id(attempt, marks.pending(name, index if len(group) > 1
                                                        else None))
        return target.submit_many([(a.job.invocation, a.log_path) for a in group], name), name

    # -- ending --------------------------------------------------------------------------
    def _collect(self) -> None:
        """Finish what ended; wait a little (a poll interval) when nothing did."""
        active = [flights for flights in self.flights.values() if flights.active]
        wait = min((flights.interval for flights in active), default=0.5)
        retry = [f.retry_in() for f in self.flights.values() if not f.active and f.retry_in()]
        if retry and not active and not self.pool.running:
            wait = min(wait, *retry)
        finished = self.pool.finished(timeout=wait if self.pool.running else 0)
        for attempt, (outcome, usage, warnings) in finished:
            self._recorded(self.recorder.finish, attempt, self._stopped(outcome), usage,
                           warnings)
        for flights in active:
            for flight, outcome in flights.poll():
                self._finish_flight(flight, outcome, flights)
        if not finished and not self.pool.running:
            self.stop.wait(wait)

    def _finish_flight(self, flight: Flight, outcome: Outcome, flights: Flights) -> None:
        attempt: Attempt = flight.key
        if flight.cancelled_for == SKIP and outcome.status == CANCELLED:
            self._recorded(self.recorder.finish_skipped, attempt, flight.cancel_message)
            return
        verdict = self._recorded(self.recorder.finish, attempt, outcome)
        if verdict is not None and verdict.out_of_memory:
            self._cancel_too_large(attempt.job.experiment, flights)

    def _cancel_too_large(self, failed: Experiment, flights: Flights) -> None:
        """An out-of-memory failure: cancel the queued jobs the out-of-memory rule skips now."""
        key = policy.oom_key(failed)
        limit = self.recorder.oom_limit(failed)

        def skipped(flight: Flight) -> bool:
            other = flight.key.job.experiment
            return policy.oom_key(other) == key and policy.too_large(other, limit)

        cancelled = flights.cancel_queued(skipped, lambda flight: (
            f"{policy.describe_size(flight.key.job.experiment)} >= {limit}, "
            f"which ran out of memory (experiment {failed['exp.id']}): its queued job "
            f"{flight.job_id} was cancelled (set exp.ignore_past_errors to try)"))
        if cancelled:
            self.reporter.note(f"cancelled {len(cancelled)} queued job(s) of larger batches "
                               f"after an out-of-memory failure of {failed['exp.id']}")

    def wind_down(self) -> None:
        """A stop was requested (or the loop failed): stop what runs, settle every attempt.

        Local processes and containers are always stopped (they are dlbs's children).
        Scheduler jobs are cancelled on a stop request with slurm.on_interrupt: cancel; after
        an error of dlbs itself they are kept, open with their job ids, for the next run to
        re-attach.
        """
        requested = self.stop.requested
        self.stop.event.set()  # the workers stop their processes and containers
        reason = self.stop.reason or "an error of dlbs"
        noted = False
        while self.pool.running:
            if self.stop.forced and not noted:
                noted = True
                self.reporter.note("a second stop signal: stopping without waiting")
            for attempt, (outcome, usage, warnings) in self.pool.finished(timeout=0.2):
                self.recorder.finish(attempt, self._stopped(outcome), usage, warnings)
        for flights in self.flights.values():
            if flights.active:
                self._wind_down_jobs(flights, requested, reason)
        if requested:
            summary = self.recorder.summary
            summary.interrupted = True
            summary.stopped_by = self.stop.reason
            summary.stop_status = self.stop.exit_status

    def _wind_down_jobs(self, flights: Flights, requested: bool, reason: str) -> None:
        job_word = flights.target.job_word
        if self.on_interrupt == "keep" or not requested:
            self.reporter.note(f"{flights.active} {job_word}(s) left queued or running "
                               "(slurm.on_interrupt: keep): the next dlbs run re-attaches "
                               "to them")
            return
        flights.cancel_all(f"interrupted ({reason}); {job_word} {{job_id}} cancelled")
        for flight, outcome in flights.drain(give_up=self.stop.event.forced):
            self._finish_flight(flight, outcome, flights)
        if flights.active:
            self.reporter.note(f"{flights.active} cancelled {job_word}(s) did not end "
                               "in time; the next dlbs run re-attaches to them")

    def _stopped(self, outcome: Outcome) -> Outcome:
        """A process or container stopped by the stop request: say what asked for it."""
        if outcome.status == INTERRUPTED and self.stop.reason:
            outcome.message = f"interrupted: dlbs run got {self.stop.reason}"
        return outcome
