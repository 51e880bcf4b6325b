"""One way for a sweep to be told to stop: Ctrl-C, SIGTERM and SIGHUP all become a `StopRequest`.

While `StopRequest.catching()` is active (the run loop's whole sweep), SIGINT, SIGTERM and
SIGHUP no longer raise or kill: each sets the request, names the signal, and the run loop
winds down at its next step (it never blocks longer than a poll interval). Workers see the
same `event` (a `StopEvent`), which the targets take as their `stop`: a local process or a
container is stopped as Ctrl-C would stop it (SIGINT, then SIGKILL after a grace period),
SLURM jobs are cancelled or kept (`slurm.on_interrupt`). Code can ask for a stop too
(`request("reason")`). Handlers are installed only from the main thread and put back as
they were when the block ends.

A second stop signal while the sweep winds down means "stop now" (docs/running.md): it sets
`event.forced`, and the targets skip what is left of the grace period (SIGKILL at once), the
run loop stops waiting for cancelled SLURM jobs to end (they stay open, to re-attach to).
Every attempt is still recorded. The exit status stays the first signal's (`exit_status`):
128 + its number, as a shell reports a process killed by it (SIGINT 130, SIGTERM 143,
SIGHUP 129).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

#: The signals that stop a sweep, by name (SIGHUP: the terminal went away).
STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
#: The exit status of a sweep stopped by code rather than by a signal (as Ctrl-C's).
STOPPED_STATUS = 130


class StopEvent(threading.Event):
    """Set on the first stop request; `forced` is set too by a second one (stop now)."""

    def __init__(self) -> None:
        super().__init__()
        self.forced = threading.Event()


def forced_event(stop: threading.Event | None) -> threading.Event | None:
    """The "stop now" event that goes with a stop event, when it has one."""
    return stop.forced if isinstance(stop, StopEvent) else None


class StopRequest:
    """The sweep's stop request: set once, by a signal or by code, read by everyone."""

    def __init__(self) -> None:
        self.event = StopEvent()
        self.reason: str | None = None
        self.signal: int | None = None
        self.count = 0

    @property
    def requested(self) -> bool:
        """Whether a stop was asked for."""
        return self.event.is_set()

    @property
    def forced(self) -> bool:
        """Whether a second stop was asked for: stop without waiting for graceful ends."""
        return self.event.forced.is_set()

    @property
    def exit_status(self) -> int:
        """128 + the first stop signal's number (130 when code asked for the stop)."""
        return 128 + self.signal if self.signal else STOPPED_STATUS

    def request(self, reason: str, signum: int | None = None) -> None:
        """Ask for a stop; the first reason (and signal) is kept, a second request forces."""
        self.count += 1
        if self.reason is None:
            self.reason = reason
            self.signal = signum
        if self.count > 1:
            self.event.forced.set()
        self.event.set()

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds, waking at once on a stop request; whether one came."""
        return self.event.wait(timeout)

    def _handle(self, signum: int, frame: Any) -> None:
        # Only sets events: printing here could re-enter a write the main thread is in.
        self.request(signal.Signals(signum).name, signum)

    @contextlib.contextmanager
    def catching(self) -> Iterator[StopRequest]:
        """Turn STOP_SIGNALS into this request for the block (main thread only; else a no-op)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {}
        for name in STOP_SIGNALS:
            number = getattr(signal, name)
            previous[number] = signal.signal(number, self._handle)
        try:
            yield self
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
