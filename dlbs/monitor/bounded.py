"""Calls into a library that may never return (NVML in a driver in trouble), with a bound.

A Python thread cannot be interrupted inside a C call, so such a call runs in a worker
thread of its own (a daemon: a process may end while it hangs there), and the caller waits
for its answer at most a given time, or until a stop is requested. A call that ran past its
bound leaves the worker busy: the calls after it fail at once with the reason, instead of
each waiting its own bound behind it, until the worker is free again. The monitor's NVML
reads go through one (`nvml.py`); nvidia-smi is a program, bounded by killing it (`gpu.py`).

Stand-alone: standard library only, Python 3.8.
"""

from __future__ import annotations

import queue
import threading
import time

#: How often a waiting caller looks at its stop event, seconds.
STOP_POLL = 0.02


class CallTimedOut(Exception):
    """The call gave no answer within its bound (it may still be running)."""


class CallCancelled(Exception):
    """A stop was requested while the caller waited; the call may still be running."""


class _Call:
    def __init__(self, function: object, args: tuple) -> None:
        self.function = function
        self.args = args
        self.done = threading.Event()
        self.value: object = None
        self.error: BaseException | None = None


class BoundedWorker:
    """Runs calls one at a time in a daemon thread named `name`; callers wait a bounded time."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._calls: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._busy_since: float | None = None  # when the call running now started
        self._overdue: str | None = None  # why the worker is taken as hung, while it is
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    @property
    def hung(self) -> str | None:
        """Why calls fail at once now (a call ran past its bound and has not returned)."""
        with self._lock:
            if self._overdue is None or self._busy_since is None:
                return None
            return f"{self._overdue} (for {time.monotonic() - self._busy_since:.3g} s now)"

    def call(self, function: object, *args: object, timeout: float,
             stop: threading.Event | None = None, what: str | None = None) -> object:
        """`function(*args)` in the worker: its value, or the exception it raised.

        `CallTimedOut` after `timeout` seconds without an answer, or at once while an
        earlier call is still overdue; `CallCancelled` when `stop` is set meanwhile. `what`
        names the call in messages (default: the function's name).
        """
        reason = self.hung
        if reason is not None:
            raise CallTimedOut(reason)
        if self._closed:
            raise CallTimedOut(f"{self.name} is closed")
        call = _Call(function, args)
        self._calls.put(call)
        deadline = time.monotonic() + timeout
        while not call.done.wait(max(0.0, min(STOP_POLL, deadline - time.monotonic()))):
            if stop is not None and stop.is_set():
                raise CallCancelled()
            if time.monotonic() >= deadline:
                with self._lock:
                    self._overdue = (f"{what or getattr(function, '__name__', 'a call')} "
                                     f"gave no answer within {timeout:g} s")
                raise CallTimedOut(self._overdue)
        if call.error is not None:
            raise call.error
        return call.value

    def close(self) -> None:
        """End the worker after the calls queued (a hung one keeps it, a daemon, for ever)."""
        self._closed = True
        self._calls.put(None)

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            with self._lock:
                self._busy_since = time.monotonic()
            try:
                call.value = call.function(*call.args)  # type: ignore[operator]
            except Exception as error:  # noqa: BLE001 - handed to the caller, whatever it is
                call.error = error
            except BaseException as error:  # noqa: BLE001 - SystemExit from a library
                call.error = RuntimeError(f"{type(error).__name__}: {error}")
            finally:
                with self._lock:
                    self._busy_since = None
                    self._overdue = None
                call.done.set()
