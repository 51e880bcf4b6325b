"""Experiment logs: where each attempt writes, and the header that starts it.

A log is only ever a regular file that dlbs created for the attempt: it is created with
O_CREAT|O_EXCL|O_NOFOLLOW, so nothing that is already in its place (a file of an earlier
attempt, a symbolic link, a device, a FIFO) is ever written through or over; each attempt
takes the next free name instead. Reopened to append, it is opened with O_NOFOLLOW and must
still be a regular file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, BinaryIO

from dlbs import __version__
from dlbs.config.limits import MAX_LINE_BYTES
from dlbs.results.protocol import HEADER_END, VERDICT_KEY, may_be_cut, protocol_line
from dlbs.traces.reader import TraceError, TraceFile

#: How many taken names `create_log` passes over before it gives up.
MAX_NAMES = 10_000


def _candidates(log_file: str, attempt: int) -> Iterator[str]:
    """The free names for an attempt's log, best first (each free when it was looked at)."""
    root, ext = os.path.splitext(log_file)
    candidate = log_file
    number = attempt
    while True:
        if attempt > 1 or number > 1:
            candidate = f"{root}.attempt{number}{ext or '.log'}"
        # A log the results store does not know (a store deleted or moved), a link: kept,
        # and passed over.
        if not os.path.lexists(candidate):
            yield candidate
        number += 1


def log_place_problem(log_file: str) -> str | None:
    """Why `exp.log_file` cannot be a log, or None: what is in its place is no regular file.

    Nothing at all, or a regular file (an earlier attempt's: this one goes beside it), is
    fine. A symbolic link, a device (`/dev/null`), a FIFO, a socket or a folder is refused
    before anything runs, so that no log is written through it nor beside it.
    """
    return _place_problem(log_file, "a log")


def trace_place_problem(trace_file: str) -> str | None:
    """Why `exp.trace_file` cannot be a trace, or None (docs/security.md).

    The backend writes the trace over what is there (a temporary file renamed over it), so
    only nothing or a trace that dlbs wrote (a retry's: a Chrome trace with dlbs's
    metadata) may be there; a log, a results database, any other file, a link, a device or
    a folder is refused before anything runs.
    """
    problem = _place_problem(trace_file, "a trace")
    if problem or not os.path.lexists(trace_file):
        return problem
    try:
        if TraceFile(trace_file).metadata():
            return None
    except TraceError:
        pass
    return "is a file that is not a trace dlbs wrote (only a trace is written over)"


def _place_problem(path: str, what: str) -> str | None:
    """Why `path` cannot be created or replaced: something other than a regular file is there."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        blocker = _file_above(path)
        return f"is under {blocker}, which is not a folder" if blocker else \
            "is under a file, not a folder"
    except OSError as error:
        return f"cannot be {what}: {error.strerror or error}"
    if stat.S_ISREG(found.st_mode):
        return None
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    kind = next((name for test, name in kinds if test(found.st_mode)), "not a regular file")
    return f"is {kind}, not a regular file"


def _file_above(path: str) -> str | None:
    """The first folder of `path`, from the top, that exists and is no folder."""
    parts = os.path.normpath(path).split(os.sep)
    for end in range(1, len(parts)):
        above = os.sep.join(parts[:end]) or os.sep
        if os.path.lexists(above) and not os.path.isdir(above):
            return above
    return None


def create_log(log_file: str, attempt: int) -> tuple[str, BinaryIO]:
    """Create the attempt's log (its folder too): (its path, the file open for writing).

    Raises OSError when it cannot be created (a full disk, a name too long, a file where a
    folder should be).
    """
    problem = log_place_problem(log_file)
    if problem:
        raise OSError(f"it {problem}")
    folder = os.path.dirname(log_file)
    if folder:
        os.makedirs(folder, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    error: OSError | None = None
    for _, candidate in zip(range(MAX_NAMES), _candidates(log_file, attempt)):
        try:
            fd = os.open(candidate, flags, 0o644)
        except FileExistsError as taken:  # appeared meanwhile (or a dangling link): next
            error = taken
            continue
        return candidate, os.fdopen(fd, "wb")
    raise error or FileExistsError(f"no free log name beside {log_file}")


def append_to_log(log_path: str) -> BinaryIO:
    """Reopen an attempt's log to append to it: never through a link, only a regular file."""
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{log_path} is no longer a regular file")
        return os.fdopen(fd, "ab")
    except BaseException:
        os.close(fd)
        raise


#: Bytes of a log's end read to see how its last line ended (a longer line is passed over by
#: its readers anyway).
_TAIL_BYTES = MAX_LINE_BYTES + 1
#: What ends a last line that may have been cut, before the verdict: its value is then no
#: JSON, as a reader would have judged it had nothing followed (protocol.may_be_cut).
CUT_MARK = b" (cut short: the run ended while this line was printed)\n"


def append_verdict(log_path: str, verdict: Mapping[str, Any]) -> bool:
    """Append dlbs's verdict on an attempt to its log; whether it could (best effort).

    `verdict` holds `attempt`, `status`, `message` and, where the store has them,
    `started_at` and `ended_at` as it recorded them (docs/backends/protocol.md section 7),
    so that a copy of the log alone keeps the attempt's outcome and is known for the same
    attempt. A last line without its line ending is ended first; one that may have been cut
    is marked so that it stays unread.
    """
    try:
        ending = _ending(log_path)
        with append_to_log(log_path) as log:
            log.write(ending + (protocol_line(VERDICT_KEY, dict(verdict)) + "\n").encode())
        return True
    except OSError:
        return False


def _ending(log_path: str) -> bytes:
    """What to write before a new line at the end of the log (nothing, a newline, CUT_MARK)."""
    fd = os.open(log_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return b""
        start = max(0, size - _TAIL_BYTES)
        tail = os.pread(fd, size - start, start)
    finally:
        os.close(fd)
    if tail.endswith(b"\n"):
        return b""
    newline = tail.rfind(b"\n")
    if newline < 0 and start > 0:
        return b"\n"   # longer than any line a reader reads: passed over either way
    return CUT_MARK if may_be_cut(tail[newline + 1:]) else b"\n"


def write_header(log: BinaryIO, experiment: Mapping[str, Any], attempt: int) -> None:
    """Every resolved parameter as `__name__=json`, so the log alone describes the run.

    The header ends with its own line (protocol.HEADER_END): what follows is the run's
    output, which may not override what the header holds (docs/backends/protocol.md 7).
    """
    started = datetime.now(UTC).isoformat(timespec="seconds")
    lines = [f"# dlbs {__version__}: experiment {experiment.get('exp.id')}, attempt {attempt}, "
             f"started {started}"]
    lines += [protocol_line(key, value) for key, value in experiment.items()]
    lines.append(HEADER_END)
    log.write(("\n".join(lines) + "\n").encode())
    log.flush()
