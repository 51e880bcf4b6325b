"""A sweep's SLURM jobs in flight: how many may be queued, and what became of each.

The run loop submits (it owns the results store) and hands each job id here; `poll()` looks
at every job in flight with one `squeue` and returns the jobs that ended, each with its
outcome. Between looks it enforces what a single `wait` used to: `exp.timeout` counts a
job's run time (a job still running after it is cancelled and ends `timeout`), and a job
pending for a reason the cluster can never satisfy is cancelled after `hopeless_after`
seconds and ends `failure`. Jobs cancelled on purpose (`cancel`) end with the reason given
(`interrupted`, or `skip`: a queued larger batch after an out-of-memory failure, which the
loop records as skipped).

`room()` says how many more jobs may be submitted: `slurm.max_in_flight` (0: no limit),
and a submit limit learnt from sbatch (`refused()`): when sbatch refuses a job for a limit,
the jobs in flight then are taken as the limit: another goes when one ends, and one more
than the limit is tried after a back-off delay (2 s, doubling to a minute, reset by a
submission that is accepted beyond it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dlbs.errors import LaunchError
from dlbs.run.outcome import CANCELLED, FAILURE, INTERRUPTED, TIMEOUT, Outcome
from dlbs.run.targets.slurm import HOPELESS_REASONS, JobState, SlurmTarget

#: Why dlbs cancelled a job itself (`Flight.cancelled_for`).
TIMED_OUT, HOPELESS, SKIP, STOPPED = "timeout", "hopeless", "skip", "interrupted"


@dataclass
class Flight:
    """One experiment's job in flight. `key` is the run loop's own record of the attempt."""

    key: Any
    job_id: str
    timeout: float | None
    submitted: float
    state: JobState | None = None
    stuck_since: float | None = None
    cancelled_for: str | None = None
    cancel_message: str = ""


class SlurmFlights:
    """The jobs in flight, and the rules of how many more may go; see the module doc."""

    #: Seconds between two looks at the queue: from `poll_min`, growing to `poll_max` while
    #: nothing changes.
    poll_min = 0.2
    poll_max = 1.0
    backoff_min = 2.0
    backoff_max = 60.0

    def __init__(self, target: SlurmTarget, max_in_flight: int) -> None:
        self.target = target
        self.max_in_flight = max_in_flight
        self.flights: dict[str, Flight] = {}
        self.interval = self.poll_min
        self._limit: int | None = None      # a submit limit learnt from sbatch
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
        """A submission was accepted by sbatch: the back-off starts again from its minimum."""
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

    def add(self, key: Any, job_id: str, timeout: float | None, submitted: bool = True
            ) -> Flight:
        """Track a job just `submitted` (pending, then), or a re-attached one."""
        flight = Flight(key, job_id, timeout if timeout and timeout > 0 else None,
                        time.monotonic(), JobState("PENDING", "", 0.0) if submitted else None)
        self.flights[job_id] = flight
        self.interval = self.poll_min
        return flight

    def poll(self) -> list[tuple[Flight, Outcome]]:
        """One look at every job in flight; the jobs that ended, with their outcomes.

        `LaunchError` once squeue has failed for `target.controller_patience` seconds.
        """
        if not self.flights:
            return []
        try:
            states = self.target.states(list(self.flights))
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
        if state.state == "PENDING" and state.reason in HOPELESS_REASONS:
            flight.stuck_since = flight.stuck_since or now
            if now - flight.stuck_since >= self.target.hopeless_after:
                self.cancel(flight, HOPELESS, f"SLURM job {flight.job_id} cannot start: "
                                              f"pending with reason {state.reason}; cancelled")
            return
        flight.stuck_since = None
        if flight.timeout and state.state == "RUNNING" and state.run_seconds >= flight.timeout:
            self.cancel(flight, TIMED_OUT, f"SLURM job {flight.job_id} still running after the "
                                           f"timeout of {flight.timeout:g} s; cancelled")

    def _outcome(self, flight: Flight) -> Outcome:
        outcome = self.target.final_outcome(flight.job_id, flight.state)
        if flight.cancelled_for is None or outcome.status != CANCELLED:
            return outcome
        status = {TIMED_OUT: TIMEOUT, HOPELESS: FAILURE, STOPPED: INTERRUPTED,
                  SKIP: CANCELLED}[flight.cancelled_for]
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
                  if not f.cancelled_for and f.state is not None and
                  f.state.state == "PENDING" and chosen(f)]
        for flight in picked:
            self.cancel(flight, SKIP, message(flight))
        return picked

    def cancel_all(self, message: str) -> None:
        """Cancel every job in flight (an interrupt with slurm.on_interrupt: cancel)."""
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
