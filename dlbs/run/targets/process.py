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
from collections.abc import Callable, Mapping, Sequence
from typing import BinaryIO

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
                       grace: float) -> None:
    """Send `first_signal` to the child's group, then SIGKILL after `grace` seconds."""
    _signal_group(process.pid, first_signal)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()
    # The leader may exit on the first signal while its workers ignore it.
    _signal_group(process.pid, signal.SIGKILL)


def run_process(argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None,
                log: BinaryIO, timeout: float | None, grace: float = DEFAULT_KILL_GRACE,
                cleanup: Callable[[], None] | None = None,
                on_start: Callable[[int], None] | None = None) -> Outcome:
    """Run `argv` (no shell) to its end, stdout and stderr into `log`; see the module doc.

    `on_start(pid)` is called right after the child started. `cleanup` runs after the child
    and its group are gone, whatever happened (the docker target removes a container there).
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
    outcome: Outcome | None = None
    try:
        try:
            if on_start is not None:
                on_start(process.pid)
            returncode = process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            stop_process_group(process, signal.SIGTERM, grace)
            outcome = Outcome(TIMEOUT, f"still running after the timeout of {limit:g} s; "
                              "its process group was stopped", process.returncode)
        except KeyboardInterrupt:
            stop_process_group(process, signal.SIGINT, grace)
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
