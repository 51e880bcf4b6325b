"""Run one command as a child process in its own process group, output into a log.

Shared by the local target and by the docker target's `nvidia-docker` launcher. The child
gets its own session (so a Ctrl-C in the terminal reaches dlbs, not the benchmark, and dlbs
decides how to stop it) and its whole process group is stopped on timeout or interrupt: a
torchrun or MXNet launcher's workers go with it.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import BinaryIO

from dlbs.run.interrupts import forced_event
from dlbs.run.outcome import FAILURE, INTERRUPTED, OK, TIMEOUT, Outcome

#: Seconds between the polite signal and SIGKILL when stopping a process group.
DEFAULT_KILL_GRACE = 5.0


def signal_name(number: int) -> str:
    """`SIGKILL` for 9; `signal 77` for a number with no name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def outcome_from_returncode(returncode: int, what: str = "process") -> Outcome:
    """Status ok for 0, else failure saying the exit status or the signal that killed it."""
    if returncode == 0:
        return Outcome(OK, returncode=0)
    if returncode < 0:
        name = signal_name(-returncode)
        return Outcome(FAILURE, f"{what} killed by {name}", returncode,
                       {"signal": name})
    return Outcome(FAILURE, f"{what} exited with status {returncode}", returncode)


def _log_fd(log: BinaryIO) -> int | None:
    """The log's file descriptor, when it has one: the child then writes straight into it."""
    try:
        return log.fileno()
    except (AttributeError, io.UnsupportedOperation, ValueError):
        return None


def _copy_stream(source: BinaryIO, log: BinaryIO) -> None:
    for chunk in iter(lambda: source.read1(65536), b""):  # type: ignore[attr-defined]
        log.write(chunk)
        log.flush()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_process_group(process: subprocess.Popen[bytes], first_signal: int,
                       grace: float, forced: threading.Event | None = None) -> None:
    """Send `first_signal` to the child's group, then SIGKILL after `grace` seconds.

    `forced` being set (a second stop signal of dlbs) cuts the grace period short.
    """
    _signal_group(process.pid, first_signal)
    try:
        _wait_unless(process, grace, forced)
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()
    # The leader may exit on the first signal while its workers ignore it.
    _signal_group(process.pid, signal.SIGKILL)


def _wait_unless(process: subprocess.Popen[bytes], limit: float,
                 forced: threading.Event | None, poll: float = 0.1) -> int:
    """`process.wait(limit)` that gives up (TimeoutExpired) as soon as `forced` is set."""
    if forced is None:
        return process.wait(timeout=limit)
    deadline = time.monotonic() + limit
    while True:
        if forced.is_set():
            raise subprocess.TimeoutExpired(process.args, limit)
        step = max(0.0, min(poll, deadline - time.monotonic()))
        try:
            return process.wait(timeout=step)
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise


class StopRequested(Exception):
    """The run loop asked a running command to stop (Ctrl-C, SIGTERM, SIGHUP of dlbs)."""


def wait_or_stop(process: subprocess.Popen[bytes], limit: float | None,
                 stop: threading.Event | None, poll: float = 0.1) -> int:
    """`process.wait(limit)`, that also ends with `StopRequested` once `stop` is set."""
    if stop is None:
        return process.wait(timeout=limit)
    deadline = None if limit is None else time.monotonic() + limit
    while True:
        step = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
        try:
            return process.wait(timeout=step)
        except subprocess.TimeoutExpired:
            if stop.is_set():
                raise StopRequested() from None
            if deadline is not None and time.monotonic() >= deadline:
                raise


def run_process(argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None,
                log: BinaryIO, timeout: float | None, grace: float = DEFAULT_KILL_GRACE,
                cleanup: Callable[[], None] | None = None,
                on_start: Callable[[int], None] | None = None,
                stop: threading.Event | None = None) -> Outcome:
    """Run `argv` (no shell) to its end, stdout and stderr into `log`; see the module doc.

    `on_start(pid)` is called right after the child started. `cleanup` runs after the child
    and its group are gone, whatever happened (the docker target removes a container there).
    `stop`, once set, stops the command as Ctrl-C would (status interrupted): how the run
    loop, which runs commands in worker threads, passes on its own interrupt; its `forced`
    (`dlbs.run.interrupts.StopEvent`), once set, skips the rest of the grace period.
    """
    log.flush()
    fd = _log_fd(log)
    try:
        process = subprocess.Popen(
            list(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
            stdout=fd if fd is not None else subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True)
    except OSError as error:
        reason = error.strerror or str(error)
        if cwd and error.filename == cwd:
            reason = f"working directory {cwd!r}: {reason}"
        message = f"cannot start {argv[0]!r}: {reason}"
        log.write(f"dlbs: {message}\n".encode())
        log.flush()
        if cleanup:
            cleanup()
        return Outcome(FAILURE, message, details={"argv": list(argv)})

    pump = None
    if fd is None:
        pump = threading.Thread(target=_copy_stream, args=(process.stdout, log), daemon=True)
        pump.start()
    limit = timeout if timeout and timeout > 0 else None
    forced = forced_event(stop)
    outcome: Outcome | None = None
    try:
        try:
            if on_start is not None:
                on_start(process.pid)
            returncode = wait_or_stop(process, limit, stop)
        except subprocess.TimeoutExpired:
            stop_process_group(process, signal.SIGTERM, grace, forced)
            outcome = Outcome(TIMEOUT, f"still running after the timeout of {limit:g} s; "
                              "its process group was stopped", process.returncode)
        except (KeyboardInterrupt, StopRequested):
            stop_process_group(process, signal.SIGINT, grace, forced)
            outcome = Outcome(INTERRUPTED, "interrupted by the user", process.returncode)
    finally:
        if process.returncode is None:  # an unexpected exception: leave nothing running
            stop_process_group(process, signal.SIGKILL, grace)
        # Whatever the leader left behind in its group (daemonized workers) goes too.
        _signal_group(process.pid, signal.SIGKILL)
        if pump is not None:
            pump.join()
            process.stdout.close()  # type: ignore[union-attr]
        if cleanup:
            cleanup()
    if outcome is None:
        outcome = outcome_from_returncode(returncode)
    outcome.details.setdefault("pid", process.pid)
    return outcome
