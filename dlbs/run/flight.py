"""A sweep's scheduler jobs in flight: how many may be queued, and what became of each.

The run loop submits (it owns the results store) and hands each job id here; `poll()` looks
at every job in flight at once (`SchedulerTarget.poll`: one `squeue` for SLURM) and returns
the jobs that ended, each with its outcome. Between looks it enforces the rules: `exp.timeout`
counts a job's run time (a job still running after it is cancelled and ends `timeout`); the
request's `queue_timeout` counts its time in the queue, from its attempt's start (a job still
queued after it is cancelled and ends `timeout`, with the scheduler's reason); and a job
pending for a reason the cluster can never satisfy (`JobState.hopeless`) is cancelled after
the target's `hopeless_after` seconds and ends `failure`. Jobs cancelled on purpose
(`cancel`) end with the reason given (`interrupted`, or `skip`: a queued job that the
out-of-memory rule skips now, which the loop records as skipped).

`room()` says how many more jobs may be submitted: `slurm.max_in_flight` (0: no limit),
and a submit limit learnt from the scheduler (`refused()`): when it refuses a job for a limit,
the jobs in flight then are taken as the limit: another goes when one ends, and one more
than the limit is tried after a back-off delay (2 s, doubling to a minute, reset by a
submission that is accepted beyond it).

`follow()` is the same for one job: how a scheduler target's `wait` follows a job to its end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dlbs.errors import LaunchError
from dlbs.run.outcome import CANCELLED, FAILURE, INTERRUPTED, TIMEOUT, Outcome
from dlbs.run.targets.scheduler import SUBMITTED, JobState, SchedulerTarget

#: Why dlbs cancelled a job itself (`Flight.cancelled_for`).
TIMED_OUT, HOPELESS, SKIP, STOPPED = "timeout", "hopeless", "skip", "interrupted"
QUEUED_OUT = "queue timeout"


@dataclass
class Flight:
    """One experiment's job in flight. `key` is the run loop's own record of the attempt."""

    key: Any
    job_id: str
    timeout: float | None
    submitted: float
    state: JobState | None = None
    #: Seconds it may stay queued from `submitted` (None: no limit).
    queue_timeout: float | None = None
    stuck_since: float | None = None
    cancelled_for: str | None = None
    cancel_message: str = ""


class Flights:
    """The jobs in flight, and the rules of how many more may go; see the module doc."""

    #: Seconds between two looks at the queue: from the target's `poll_min`, growing to
    #: `poll_max` (at most a second: the loop waits on its own jobs meanwhile) while nothing
    #: changes.
    poll_max = 1.0
    backoff_min = 2.0
    backoff_max = 60.0

    def __init__(self, target: SchedulerTarget, max_in_flight: int) -> None:
        self.target = target
        self.max_in_flight = max_in_flight
        self.flights: dict[str, Flight] = {}
        self.poll_min = target.poll_min
        self.interval = self.poll_min
        self._limit: int | None = None      # a submit limit learnt from the scheduler
        self._retry_at = 0.0
        self._backoff = self.backoff_min
        self._unreachable_since: float | None = None

    # -- how many may go ---------------------------------------------------------------

    @property
    def active(self) -> int:
        """Jobs in flight now."""
        return len(self.flights)

    def room(self) -> int:
        """How many more jobs may be submitted now."""
        caps = [self.max_in_flight] if self.max_in_flight > 0 else []
        if self._limit is not None:
            if time.monotonic() < self._retry_at:
                caps.append(self._limit)
            else:  # the back-off is over: try one more than the limit learnt
                caps.append(self._limit + 1)
        if not caps:
            return 1 << 30
        return max(0, min(caps) - self.active)

    def accepted(self) -> None:
        """A submission was accepted: the back-off starts again from its minimum."""
        self._backoff = self.backoff_min
        if self._limit is not None and self.active > self._limit:
            self._limit = self.active

    def refused(self) -> float:
        """A submission was refused for a submit limit: hold back; the back-off in seconds."""
        delay = self._backoff
        self._limit = max(1, self.active) if self.active else 0
        self._retry_at = time.monotonic() + delay
        self._backoff = min(self.backoff_max, self._backoff * 2)
        return delay

    def retry_in(self) -> float:
        """Seconds until a refused submission may be tried again (0: now)."""
        return max(0.0, self._retry_at - time.monotonic())

    # -- tracking ------------------------------------------------------------------------

    def add(self, key: Any, job_id: str, timeout: float | None, submitted: bool = True,
            queue_timeout: float | None = None, queued_for: float = 0.0) -> Flight:
        """Track a job just `submitted` (pending, then), or a re-attached one.

        `queue_timeout`: the seconds it may stay queued; `queued_for`: the seconds it has
        been already (a re-attached job: since its attempt started).
        """
        flight = Flight(key, job_id, timeout if timeout and timeout > 0 else None,
                        time.monotonic() - max(0.0, queued_for),
                        SUBMITTED if submitted else None,
                        queue_timeout=queue_timeout if queue_timeout and queue_timeout > 0
                        else None)
        self.flights[job_id] = flight
        self.interval = self.poll_min
        return flight

    def poll(self) -> list[tuple[Flight, Outcome]]:
        """One look at every job in flight; the jobs that ended, with their outcomes.

        `LaunchError` once the scheduler has not answered for `target.controller_patience`
        seconds.
        """
        if not self.flights:
            return []
        try:
            states = self.target.poll(list(self.flights))
            self._unreachable_since = None
        except LaunchError:
            self._unreachable_since = self._unreachable_since or time.monotonic()
            if time.monotonic() - self._unreachable_since > self.target.controller_patience:
                raise
            return []
        ended: list[tuple[Flight, Outcome]] = []
        now = time.monotonic()
        for job_id, flight in list(self.flights.items()):
            state = states.get(job_id)
            if state is not None:
                flight.state = state
            if state is None or state.final:
                del self.flights[job_id]
                ended.append((flight, self._outcome(flight)))
                continue
            self._enforce(flight, state, now)
        self.interval = self.poll_min if ended else min(self.poll_max, self.interval * 1.5)
        return ended

    def _enforce(self, flight: Flight, state: JobState, now: float) -> None:
        """Timeouts and hopeless pending reasons, between two looks."""
        if flight.cancelled_for:
            return
        job = f"{self.target.job_word} {flight.job_id}"
        if state.hopeless:
            flight.stuck_since = flight.stuck_since or now
            if now - flight.stuck_since >= self.target.hopeless_after:
                self.cancel(flight, HOPELESS, f"{job} cannot start: pending with reason "
                                              f"{state.reason}; cancelled")
            return
        flight.stuck_since = None
        if flight.queue_timeout and state.queued and \
                now - flight.submitted >= flight.queue_timeout:
            reason = f", reason {state.reason}" if state.reason and state.reason != "None" \
                else ""
            self.cancel(flight, QUEUED_OUT, f"{job} still queued ({state.state}{reason}) after "
                                            f"its queue timeout of {flight.queue_timeout:g} s; "
                                            "cancelled")
            return
        if flight.timeout and state.running and state.run_seconds >= flight.timeout:
            self.cancel(flight, TIMED_OUT, f"{job} still running after the timeout of "
                                           f"{flight.timeout:g} s; cancelled")

    def _outcome(self, flight: Flight) -> Outcome:
        outcome = self.target.final_outcome(flight.job_id, flight.state)
        if flight.cancelled_for is None or outcome.status != CANCELLED:
            return outcome
        status = {TIMED_OUT: TIMEOUT, QUEUED_OUT: TIMEOUT, HOPELESS: FAILURE,
                  STOPPED: INTERRUPTED, SKIP: CANCELLED}[flight.cancelled_for]
        return Outcome(status, flight.cancel_message, outcome.returncode, outcome.details)

    def cancel(self, flight: Flight, reason: str, message: str) -> None:
        """Cancel one job on purpose; it ends (at a later `poll`) with `message`."""
        flight.cancelled_for = reason
        flight.cancel_message = message
        self.target.cancel(flight.job_id)

    def cancel_queued(self, chosen: Callable[[Flight], bool], message: Callable[[Flight], str]
                      ) -> list[Flight]:
        """Cancel the jobs still pending that `chosen` picks (to be skipped); those cancelled."""
        picked = [f for f in self.flights.values()
                  if not f.cancelled_for and f.state is not None and f.state.queued and
                  chosen(f)]
        for flight in picked:
            self.cancel(flight, SKIP, message(flight))
        return picked

    def cancel_all(self, message: str) -> None:
        """Cancel every job in flight (an interrupt with slurm.on_interrupt: cancel).

        `message` may name the job as `{job_id}`.
        """
        for flight in self.flights.values():
            if flight.cancelled_for is None:
                self.cancel(flight, STOPPED, message.format(job_id=flight.job_id))

    def drain(self, limit: float = 120.0, give_up: threading.Event | None = None
              ) -> list[tuple[Flight, Outcome]]:
        """Look until every job in flight ended; the jobs that did.

        Gives up after `limit` seconds, or once `give_up` is set (a second stop signal).
        """
        deadline = time.monotonic() + limit
        ended: list[tuple[Flight, Outcome]] = []
        while self.flights and time.monotonic() < deadline:
            ended += self.poll()
            if self.flights:
                if give_up is None:
                    time.sleep(self.poll_min)
                elif give_up.wait(self.poll_min):
                    break
        return ended


def follow(target: SchedulerTarget, job_id: str, timeout: float | None) -> Outcome:
    """Follow one job to its end, with the rules of the module doc; see `SchedulerTarget.wait`.

    A KeyboardInterrupt cancels the job and returns status interrupted.
    """
    flights = Flights(target, max_in_flight=0)
    flights.poll_max = target.poll_max
    flight = flights.add(None, job_id, timeout, submitted=False)
    try:
        while True:
            for _, outcome in flights.poll():
                return outcome
            time.sleep(flights.interval)
    except KeyboardInterrupt:
        if not flight.cancelled_for:
            target.cancel(job_id)
        return Outcome(INTERRUPTED, f"interrupted by the user; {target.job_word} {job_id} "
                       "cancelled", details={"job_id": job_id})
