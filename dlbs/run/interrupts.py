"""One way for a sweep to be told to stop: Ctrl-C, SIGTERM and SIGHUP all become a `StopRequest`.

While `StopRequest.catching()` is active (the run loop's whole sweep), SIGINT, SIGTERM and
SIGHUP no longer raise or kill: each sets the request, names the signal, and the run loop
winds down at its next step (it never blocks longer than a poll interval). Workers see the
same `event` (a `threading.Event`), which the targets take as their `stop`: a local process
or a container is stopped as Ctrl-C would stop it, SLURM jobs are cancelled or kept
(`slurm.on_interrupt`). Code can ask for a stop too (`request("reason")`). Handlers are
installed only from the main thread and put back as they were when the block ends.

A second signal while the sweep winds down is counted (`count`) and otherwise changes
nothing here: what it should do (give up waiting, kill harder) is the caller's decision.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

#: The signals that stop a sweep, by name (SIGHUP: the terminal went away).
STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


class StopRequest:
    """The sweep's stop request: set once, by a signal or by code, read by everyone."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reason: str | None = None
        self.count = 0

    @property
    def requested(self) -> bool:
        """Whether a stop was asked for."""
        return self.event.is_set()

    def request(self, reason: str) -> None:
        """Ask for a stop; the first reason is kept."""
        self.count += 1
        if self.reason is None:
            self.reason = reason
        self.event.set()

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds, waking at once on a stop request; whether one came."""
        return self.event.wait(timeout)

    def _handle(self, signum: int, frame: Any) -> None:
        self.request(signal.Signals(signum).name)

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
