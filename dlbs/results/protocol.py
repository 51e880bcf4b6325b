"""The log protocol: `__<key>__=<json>` lines, as backends, the run loop and DLBS print them.

A log is read line by line and never held in memory; the pieces of a line between carriage
returns (a progress bar redraws itself with them) count as lines of their own. A line
counts when, after optional blanks and an optional launcher rank prefix (`0: ` from
`srun --label`, `[default0]:` from torchrun, `[1,0]<stdout>:` from mpirun, `[rank0]:` from
PyTorch), it starts with `__<key>__=`; the rest of the line is a JSON value. The last
occurrence of a key wins (DLBS appended re-runs to the same file). Every other line is
ignored; a matching line whose value is not JSON is counted, not fatal: a killed backend
may leave half a line. `__progress__=` lines are not facts: a backend's note on how far a
long run has come, which the run loop relays to the user (`on_progress`) and no log reader
keeps (docs/backends/protocol.md section 3).

Two limits keep a log from lying or from taking the memory (docs/security.md):
- a line is at most `MAX_LINE_BYTES`; a longer one is passed over as it is read, never
  held, and counted (`too_long`);
- the last line of a log, when it has no line ending, may have been cut where the backend
  was killed: `__results.time__=50.0` may be the start of `50.089`. When its value is a
  number it is not read, and counted as cut (a string, a list or an object cut short is
  no JSON, and a whole one is read).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import orjson

from dlbs.config.limits import MAX_LINE_BYTES
from dlbs.config.names import PROGRESS_KEY
from dlbs.errors import ResultsError
from dlbs.util.exact_json import has_long_digits

# Statuses the engine records (docs/backends/protocol.md section 6); a backend prints ok or
# failure.
STATUSES: tuple[str, ...] = ("ok", "failure", "skipped", "interrupted", "timeout", "cancelled")

_PREFIX = r"[ \t]*(?:(?:\d+|\[[^\]\r\n]*\](?:<\w+>)?)[ \t]*:[ \t]*)?"
_KEY = r"__(?P<key>[A-Za-z0-9_.\-]+?)__="
_LINE_STR = re.compile(_PREFIX + _KEY + r"(?P<value>.*)", re.DOTALL)
_LINE_BYTES = re.compile(_PREFIX.encode() + _KEY.encode() + rb"(?P<value>.*)", re.DOTALL)

_READ_BUFFER = 1 << 20
#: The key of a backend's progress note (no parameter may have it): never a value of the log.
_PROGRESS_BYTES = PROGRESS_KEY.encode()
_VALID_KEY = re.compile(r"[A-Za-z0-9_.\-]+")


def protocol_line(key: str, value: Any) -> str:
    """The line that states `key` = `value` (no line ending): what log headers hold.

    JSON escapes newlines, so a value never spills onto a second line.
    """
    if not _VALID_KEY.fullmatch(key):
        raise ValueError(f"{key!r} cannot be a protocol key (letters, digits, _ . - only)")
    return f"__{key}__={json.dumps(value, default=str)}"


@dataclass
class ParsedLog:
    """What one log (or one stream of lines) holds.

    `values` maps each key to the last value seen; `lines` counts every line read,
    `matched` the protocol lines whose value parsed, `unparsable` those whose value did not.
    """

    values: dict[str, Any] = field(default_factory=dict)
    lines: int = 0
    matched: int = 0
    unparsable: int = 0
    path: str | None = None
    #: Lines longer than MAX_LINE_BYTES, passed over; and a cut last line (0 or 1).
    too_long: int = 0
    cut: int = 0


def _decode_value(raw: bytes | str) -> tuple[bool, Any]:
    """JSON value of `raw`; (False, None) when it is not JSON.

    orjson is the fast path; Python's json is the fallback because `json.dumps` in a
    backend writes NaN and Infinity, which orjson (strict JSON) refuses.
    """
    if not has_long_digits(raw):  # else an integer beyond 64 bits, which orjson would round
        try:
            return True, orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    try:
        return True, json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # deeper than any result
        return False, None


class ProtocolParser:
    """Incremental parser: feed lines (str or bytes) as they arrive, read `result` at any time."""

    def __init__(self, path: str | None = None,
                 on_progress: Callable[[Any], None] | None = None) -> None:
        self.result = ParsedLog(path=path)
        #: Called with the value of each progress note (which is not kept as a value).
        self.on_progress = on_progress

    def feed(self, line: str | bytes) -> None:
        """Read one line (with or without its line ending)."""
        self.feed_lines((line,))

    def feed_lines(self, lines: Iterable[str | bytes]) -> None:
        """Read many lines; the loop is kept tight because logs can be large."""
        result = self.result
        values = result.values
        count = matched = unparsable = 0
        for line in lines:
            count += 1
            # The substring test rejects most lines before any regex runs.
            if isinstance(line, bytes):
                if b"__=" not in line:
                    continue
                pattern: re.Pattern[Any] = _LINE_BYTES
                progress: str | bytes = _PROGRESS_BYTES
                # A progress bar redraws with \r: a terminal shows what follows the last
                # one, and so the protocol line printed after a bar is found there.
                segments = line.split(b"\r") if b"\r" in line else (line,)
            else:
                if "__=" not in line:
                    continue
                pattern = _LINE_STR
                progress = PROGRESS_KEY
                segments = line.split("\r") if "\r" in line else (line,)
            for segment in segments:
                match = pattern.match(segment)
                if match is None:
                    continue
                key = match.group("key")
                ok, value = _decode_value(match.group("value"))
                if not ok:
                    unparsable += 1
                elif key == progress:
                    if self.on_progress is not None:
                        self.on_progress(value)
                else:
                    values[key.decode("ascii") if isinstance(key, bytes) else key] = value
                    matched += 1
        result.lines += count
        result.matched += matched
        result.unparsable += unparsable


    def feed_stream(self, stream: BinaryIO) -> None:
        """Read a whole binary stream, within the limits of the module doc."""
        pending: list[bytes] = []  # the start of a line that the chunks read so far cut
        pending_size = 0
        skipping = False  # inside a line that is too long: nothing is kept until its end
        while chunk := stream.read(_READ_BUFFER):
            lines = chunk.split(b"\n")
            tail = lines.pop()
            if lines:
                if skipping:
                    lines.pop(0)
                    self.result.lines += 1
                    self.result.too_long += 1
                    skipping = False
                elif pending:
                    lines[0] = b"".join((*pending, lines[0]))
                    if len(lines[0]) > MAX_LINE_BYTES:
                        lines.pop(0)
                        self.result.lines += 1
                        self.result.too_long += 1
                pending, pending_size = [], 0
                self.feed_lines(lines)
            if skipping:
                continue
            pending.append(tail)
            pending_size += len(tail)
            if pending_size > MAX_LINE_BYTES:
                pending, pending_size, skipping = [], 0, True
        if skipping:
            self.result.lines += 1
            self.result.too_long += 1
        elif pending_size:
            self._feed_last(b"".join(pending))

    def _feed_last(self, line: bytes) -> None:
        """The last line, without a line ending: a number at its very end may be cut."""
        head, _, last = line.rpartition(b"\r")
        if head:  # what a carriage return ended is whole
            self.feed(head)
            self.result.lines -= 1
        match = _LINE_BYTES.match(last) if b"__=" in last else None
        if match is not None:
            ok, value = _decode_value(match.group("value"))
            if ok and _is_number(value):
                self.result.lines += 1
                self.result.cut += 1
                return
        self.feed(last)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_lines(lines: Iterable[str | bytes], path: str | None = None) -> ParsedLog:
    """Parse an iterable of lines (str or bytes) in the `__key__=json` protocol."""
    parser = ProtocolParser(path)
    parser.feed_lines(lines)
    return parser.result


def parse_log(path: str | os.PathLike[str]) -> ParsedLog:
    """Parse one log file; raise ResultsError when it cannot be read."""
    name = os.fspath(path)
    try:
        with open(name, "rb", buffering=0) as stream:
            parser = ProtocolParser(name)
            parser.feed_stream(stream)
            return parser.result
    except OSError as error:
        raise ResultsError(f"cannot read log {name}: {error.strerror or error}") from error


def judge_status(values: dict[str, Any]) -> dict[str, Any]:
    """Return `values` with `results.status` set the way DLBS judged a log without one.

    A log without `results.status` (a DLBS log, or a backend killed before it printed one)
    is ok when `results.time` is a positive number, else a failure with a reason.
    """
    judged = dict(values)
    if "results.status" in judged:
        return judged
    batch_time = judged.get("results.time")
    if _is_positive_number(batch_time):
        judged["results.status"] = "ok"
    else:
        judged["results.status"] = "failure"
        judged.setdefault(
            "results.status_msg",
            "the log has no results.status and no positive results.time",
        )
    return judged


def _is_positive_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def experiment_from_log(parsed: ParsedLog) -> dict[str, Any]:
    """One experiment (flat dict of `exp.*`, `results.*`, ... keys) from a parsed log.

    The status is judged as `judge_status` says; a log without a status whose last line was
    cut (see the module doc) is a failure, whatever it printed before. `results.log_file`
    is the file read (as for an attempt from the results database); `exp.log_file` is set
    to it too when the log does not name one itself (DLBS users' scripts read that key).
    """
    experiment = judge_status(parsed.values)
    if parsed.cut and "results.status" not in parsed.values:
        experiment["results.status"] = "failure"
        experiment["results.status_msg"] = (
            "the log was cut short: its last line, a number, has no line ending (the "
            "backend was stopped while it printed)")
    if parsed.path is not None:
        experiment.setdefault("exp.log_file", parsed.path)
        experiment["results.log_file"] = parsed.path
    return experiment
