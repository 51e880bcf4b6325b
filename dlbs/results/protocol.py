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

A log that `dlbs run` wrote has three parts (docs/backends/protocol.md section 7): its
header (a `# dlbs ...: experiment <id>, attempt <n>, ...` line, then every parameter the
planner decided, then `# dlbs: the run's output follows`), the run's output (what the
launcher and the backend print), and, once the attempt has ended, dlbs's verdict
(`__dlbs.verdict__={"status": ..., "message": ..., ...}`). The parser keeps the header's
values (`ParsedLog.header`) apart from what was printed after it (`ParsedLog.printed`), so
that what a benchmark prints never overrides what the planner decided: only the keys a
backend owns (`backend_owns`: `results.*` but dlbs's own, `exp.model_title`,
`exp.framework_ver`, `predict.result`, the job monitors' `job.*`) are taken from its output,
and the others are named as refused (`backend_output`). A log without that header (DLBS's, or
written by hand) has no planner's part: every key is taken as printed. In a header written
before the closing line existed, the header ends at its first line that is not a parameter.

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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import orjson

from dlbs.config.limits import MAX_LINE_BYTES
from dlbs.config.names import PROGRESS_KEY
from dlbs.errors import ResultsError
from dlbs.util.exact_json import has_long_digits, unicode_only

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

#: The first line of a log's header, and the line that ends it (see the module).
HEADER_START = re.compile(r"# dlbs \S+: experiment ")
HEADER_END = "# dlbs: the run's output follows"
_HEADER_START_BYTES = re.compile(HEADER_START.pattern.encode())
#: The line dlbs appends to an attempt's log with the verdict it reached.
VERDICT_KEY = "dlbs.verdict"
#: Keys outside `results.` that backends print and own (docs/backends/protocol.md section 4).
BACKEND_KEYS = frozenset({"exp.model_title", "exp.framework_ver", "predict.result"})
#: What a scheduler job's node monitors print into its log (dlbs.monitor.node).
NODE_PREFIXES = ("job.environment.", "job.monitor.")
#: `results.` keys that dlbs sets, never a backend: the monitor's series, where the attempt's
#: log is and its number in the store.
DLBS_RESULT_PREFIXES = ("results.use.", "results.log_file", "results.attempt")
TRACE_KEY = "results.trace_file"
PLANNED_TRACE_KEY = "exp.trace_file"


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
    #: The header's values (what the planner decided), None for a log without a dlbs header.
    header: dict[str, Any] | None = None
    #: What was printed after the header (the whole log's values when it has none).
    printed: dict[str, Any] = field(default_factory=dict)

    def output(self, cwd: str | None = None) -> tuple[dict[str, Any], list[str]]:
        """`backend_output` of what was printed against the header (all of it without one)."""
        if self.header is None:
            return dict(self.values), []
        return backend_output(self.printed, self.header, cwd)

    @property
    def verdict(self) -> dict[str, Any] | None:
        """The verdict dlbs appended to the log (see the module), if any and well formed."""
        verdict = self.printed.get(VERDICT_KEY) if self.header is not None else None
        if isinstance(verdict, dict) and verdict.get("status") in STATUSES:
            return verdict
        return None


def backend_owns(key: str) -> bool:
    """Whether a benchmark's output may set `key` (see the module)."""
    if key.startswith("results."):
        return not key.startswith(DLBS_RESULT_PREFIXES)
    return key in BACKEND_KEYS or key.startswith(NODE_PREFIXES)


def outcome_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a stored attempt's results (or summary) that may stand beside its params.

    `results.*` and the keys a backend owns outside them (BACKEND_KEYS): a result stored by
    an older dlbs, or written by another writer of the store, never relabels the attempt's
    parameters when it is read (docs/security.md, "Trust boundaries").
    """
    return {key: value for key, value in values.items()
            if key.startswith("results.") or key in BACKEND_KEYS}


def backend_output(printed: Mapping[str, Any], planned: Mapping[str, Any],
                   cwd: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """(what is taken from a benchmark's output, the keys refused), against the plan.

    Taken: the keys a backend owns (`backend_owns`), and `results.trace_file` only when it
    names the planned trace (`exp.trace_file`, from `cwd` when it is relative and `cwd` is
    known, else as the end of the printed path). Refused: every other key whose value is not
    the planned one (an echo of a parameter is no news), and a trace file elsewhere. dlbs's
    verdict is read apart (`ParsedLog.verdict`).
    """
    taken: dict[str, Any] = {}
    refused: list[str] = []
    for key, value in printed.items():
        if key == TRACE_KEY:
            if _planned_trace(value, planned.get(PLANNED_TRACE_KEY), cwd):
                taken[key] = value
            else:
                refused.append(key)
        elif backend_owns(key):
            taken[key] = value
        elif key != VERDICT_KEY and (key not in planned or planned[key] != value):
            refused.append(key)
    return taken, refused


def refused_note(keys: Iterable[str]) -> str:
    """What a warning says of output keys that were not taken (`backend_output`)."""
    return (f"its output set {', '.join(keys)}: not taken (a benchmark sets results.* but "
            "dlbs's own, results.trace_file only as planned, exp.model_title and "
            "exp.framework_ver; what the planner decided stays: docs/backends/protocol.md "
            "section 4)")


def _planned_trace(printed: Any, planned: Any, cwd: str | None) -> bool:
    """Whether the printed trace file is the planned one (see `backend_output`)."""
    if not isinstance(printed, str) or not isinstance(planned, str) or not planned or \
            not os.path.isabs(printed):
        return False
    printed = os.path.normpath(printed)
    if os.path.isabs(planned):
        return printed == os.path.normpath(planned)
    if cwd is not None:
        return printed == os.path.normpath(os.path.join(cwd, planned))
    return printed.endswith(os.sep + os.path.normpath(planned))


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
    try:   # a string of a lone surrogate ("\ud800") is no text: counted as not JSON
        return True, unicode_only(json.loads(raw))
    except (ValueError, UnicodeDecodeError, RecursionError):  # deeper than any result
        return False, None


class ProtocolParser:
    """Incremental parser: feed lines (str or bytes) as they arrive, read `result` at any time."""

    def __init__(self, path: str | None = None,
                 on_progress: Callable[[Any], None] | None = None) -> None:
        self.result = ParsedLog(path=path)
        #: Called with the value of each progress note (which is not kept as a value).
        self.on_progress = on_progress
        # Where the next line is: at the start, in the header, or in the output after it.
        self._in_header: bool | None = None

    def feed(self, line: str | bytes) -> None:
        """Read one line (with or without its line ending)."""
        self.feed_lines((line,))

    def feed_lines(self, lines: Iterable[str | bytes]) -> None:
        """Read many lines; the loop is kept tight because logs can be large."""
        if self._in_header is not False:
            lines = self._header_lines(iter(lines))
        result = self.result
        values = result.values
        printed = result.printed
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
                    name = key.decode("ascii") if isinstance(key, bytes) else key
                    values[name] = printed[name] = value
                    matched += 1
        result.lines += count
        result.matched += matched
        result.unparsable += unparsable

    def _header_lines(self, lines: Iterator[str | bytes]) -> Iterator[str | bytes]:
        """Read the header's lines (see the module) and give back every line after it."""
        result = self.result
        for line in lines:
            text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
            text = text.rstrip("\r\n")
            if self._in_header is None:   # the first line: a dlbs header, or none at all
                if HEADER_START.match(text):
                    self._in_header = True
                    result.header = {}
                    result.lines += 1
                    continue
                self._in_header = False
                yield line
                break
            if text == HEADER_END:
                self._in_header = False
                result.lines += 1
                break
            match = _LINE_STR.match(text)
            ok, value = _decode_value(match.group("value")) if match else (False, None)
            key = match.group("key") if match else ""
            if not ok or key.startswith("results.") or key == PROGRESS_KEY:
                # A header written before its closing line: it ended before this line.
                self._in_header = False
                yield line
                break
            result.lines += 1
            result.matched += 1
            assert result.header is not None
            result.header[key] = result.values[key] = value
        yield from lines


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
        if may_be_cut(last):
            self.result.lines += 1
            self.result.cut += 1
            return
        self.feed(last)


def may_be_cut(line: bytes) -> bool:
    """Whether `line`, a log's last line without its line ending, may have been cut.

    So it is when (after its last carriage return) it is a protocol line whose value is a
    number: `__results.time__=50.0` may be the start of `50.089` (see the module).
    """
    last = line.rpartition(b"\r")[2]
    match = _LINE_BYTES.match(last) if b"__=" in last else None
    if match is None:
        return False
    ok, value = _decode_value(match.group("value"))
    return ok and _is_number(value)


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

    A log with a dlbs header is the header's parameters and what the backend owns of its
    output (`ParsedLog.output`); a log without one, every key as printed. The status is the
    verdict dlbs appended (a timeout, a signal) when the log has one, else judged as
    `judge_status` says; a log without a status whose last line was cut (see the module
    doc) is a failure, whatever it printed before. `results.log_file` is the file read (as
    for an attempt from the results database); `exp.log_file` is set to it too when the log
    does not name one itself (DLBS users' scripts read that key).
    """
    taken, _ = parsed.output()
    experiment = dict(parsed.header or {})
    experiment.update(taken)
    printed_status = "results.status" in experiment
    experiment = judge_status(experiment)
    verdict = parsed.verdict
    if verdict is not None:
        experiment["results.status"] = verdict["status"]
        message = verdict.get("message")
        if isinstance(message, str) and message:
            experiment["results.status_msg"] = message
        else:
            experiment.pop("results.status_msg", None)
    elif parsed.cut and not printed_status:
        experiment["results.status"] = "failure"
        experiment["results.status_msg"] = (
            "the log was cut short: its last line, a number, has no line ending (the "
            "backend was stopped while it printed)")
    if parsed.path is not None:
        experiment.setdefault("exp.log_file", parsed.path)
        experiment["results.log_file"] = parsed.path
    return experiment
