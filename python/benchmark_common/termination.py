"""SIGTERM ends a backend with a failure and its reason, even where Python loses the exception.

A launcher, a scheduler or dlbs's timeout stops a backend with SIGTERM; the backend's handler
raises an exception in the main thread, and `main` reports it (`results.status` failure, the
reason) and exits non-zero. But Python discards an exception raised where it cannot pass it
on: inside a `__del__`, a weakref or garbage-collector callback, a ctypes callback, or an import
that C code started ("Exception ignored in ..."). A signal that lands there is lost, and the run
goes on as if none had come (an MXNet run that should have stopped went on until the caller
killed it). So the handler also wakes a backstop thread: if `main` has not claimed the failure
within `grace_s`, the thread reports it itself and ends the process.

`claim` is what `main` calls first when it handles a failure: from then on the backstop does
nothing; if the backstop is already reporting, `claim` waits for it to end the process, so a
failure is never printed twice. Python 3.8+ and the standard library only.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

GRACE_S = 10.0
"""How long the exception may take to reach `main` (through `finally` blocks, a data loader's
shutdown) before the backstop takes over."""


class Termination:
    """SIGTERM as `error_type` in the main thread, with the backstop of the module doc."""

    def __init__(self, error_type: Callable[[str], BaseException],
                 report: Callable[[BaseException], None], grace_s: float = GRACE_S) -> None:
        self._error_type = error_type
        self._report = report
        self._grace_s = grace_s
        self._signalled = threading.Event()
        self._error: BaseException | None = None
        self._reporting = threading.Lock()

    def install(self) -> None:
        """Handle SIGTERM from now on (call from the main thread)."""
        # The thread is started here, not in the handler: the handler may interrupt the main
        # thread inside `threading`'s own code, holding a lock that starting a thread needs.
        threading.Thread(target=self._backstop, name="dlbs-sigterm-backstop",
                         daemon=True).start()
        signal.signal(signal.SIGTERM, self._handle)

    def claim(self) -> None:
        """`main` reports this failure: the backstop stands down (or ends the process first)."""
        if not self._reporting.acquire(blocking=False):
            threading.Event().wait()  # the backstop is reporting; it ends the process

    def _handle(self, signum: int, frame: object) -> None:
        error = self._error_type(f"terminated by signal {signum}")
        if self._error is None:
            self._error = error
            self._signalled.set()
        raise error

    def _backstop(self) -> None:
        self._signalled.wait()
        threading.Event().wait(self._grace_s)
        if not self._reporting.acquire(blocking=False):
            return  # main has claimed the failure and reports it
        error = self._error
        assert error is not None
        try:
            print(f"{error!r} was lost where Python could not pass it on (see the output "
                  "above); reporting it here", file=sys.stderr)
            self._report(error)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
