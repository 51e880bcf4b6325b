"""One Chrome trace file, streamed: its dlbs metadata and its spans, one at a time.

A trace is JSON (gzip-compressed or not): an object with a `traceEvents` array (and, when
dlbs wrote it, a `dlbs` object first), or a bare array of events. The events are read with
ijson's incremental parser, so memory stays flat whatever the file's size: nothing here holds
more than one event, plus one open "B" event per thread and nesting level. One event is at
most `MAX_EVENT_BYTES` (decompressed): the parser builds a long string in time that grows
with the square of its length, so a 1 MB gzip holding a 1 GB event name is refused after
its first few MiB. Anything that is not such a trace (not gzip or JSON, cut short, events
that are not objects, a complete event whose time is not a number, an event too large)
raises `TraceError` naming the file and the reason. A span whose duration is negative (an
"X" event's `dur`, an "E" event before its "B") or whose time or duration is not finite is
not a span of time: it is left out, counted in `left_out` with the first one described in
`first_left_out`, and the views say so in a note (a damaged trace, or clocks that disagree).
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from collections.abc import Iterator
from typing import IO, Any

import ijson

from dlbs.config.limits import MAX_EVENT_BYTES
from dlbs.errors import ResultsError
from dlbs.traces.events import Span

GZIP_MAGIC = b"\x1f\x8b"
#: The parser's read size: bigger reads are faster; memory stays a small multiple of it.
CHUNK = 1 << 16
#: ijson events that end a value at its own prefix: a container's end, or a scalar.
_VALUE_ENDS = frozenset({"end_map", "end_array", "string", "number", "boolean", "null"})


class TraceError(ResultsError):
    """A file that is not a readable Chrome trace (the CLI exits with status 2)."""


class TraceFile:
    """A trace on disk; each call to `spans()` or `metadata()` reads it again from the start."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        if not os.path.isfile(self.path):
            raise TraceError(f"no trace file at {self.path}")
        self.compressed = self._starts_with(GZIP_MAGIC)
        first = self._first_byte()
        if first not in (b"{", b"["):
            raise TraceError(f"{self.path} is not a Chrome trace: it holds neither a JSON object "
                             f"nor an array" + (" (after gzip)" if self.compressed else ""))
        self.is_array = first == b"["
        #: Events read by the last `spans()` pass.
        self.events_read = 0
        #: Spans the last pass left out (a negative or non-finite duration or time), and the
        #: first of them, described.
        self.left_out = 0
        self.first_left_out: str | None = None

    # -- public ----------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        """The `dlbs` object dlbs writes before the events ({} in other traces)."""
        if self.is_array:
            return {}
        with self._guard(), self._open() as stream:
            parser = ijson.parse(stream, buf_size=CHUNK, use_float=True)
            for prefix, event, value in parser:
                stream.mark()
                if prefix != "" or event != "map_key":
                    continue
                if value == "traceEvents":
                    return {}  # dlbs writes its metadata first: this trace has none
                if value == "dlbs":
                    builder = ijson.ObjectBuilder()
                    for inner_prefix, inner_event, inner_value in parser:
                        builder.event(inner_event, inner_value)
                        if inner_prefix == "dlbs" and inner_event in _VALUE_ENDS:
                            break
                    value = builder.value
                    return value if isinstance(value, dict) else {}
        return {}

    def spans(self) -> Iterator[Span]:
        """Every complete ("X") event and matched "B"/"E" pair, in file order."""
        self.events_read = 0
        self.left_out, self.first_left_out = 0, None
        open_spans: dict[tuple[Any, Any], list[tuple[str, str, float, dict[str, Any]]]] = {}
        with self._guard(), self._open() as stream:
            for index, event in enumerate(ijson.items(stream, "item" if self.is_array else
                                                      "traceEvents.item",
                                                      buf_size=CHUNK, use_float=True)):
                self.events_read = index + 1
                stream.mark()
                if not isinstance(event, dict):
                    raise TraceError(f"{self.path}: event #{index} is not a JSON object")
                phase = event.get("ph")
                if phase == "X":
                    found = Span(str(event.get("cat", "")), str(event.get("name", "")),
                                 self._number(event, "ts", index),
                                 self._number(event, "dur", index), event.get("pid"),
                                 event.get("tid"), _args(event))
                    if self._keeps(found, index):
                        yield found
                elif phase == "B":
                    stack = open_spans.setdefault((event.get("pid"), event.get("tid")), [])
                    stack.append((str(event.get("cat", "")), str(event.get("name", "")),
                                  self._number(event, "ts", index), _args(event)))
                elif phase == "E":
                    stack = open_spans.get((event.get("pid"), event.get("tid")))
                    if stack:
                        cat, name, begin, args = stack.pop()
                        end = self._number(event, "ts", index)
                        found = Span(cat, name, begin, end - begin, event.get("pid"),
                                     event.get("tid"), {**args, **_args(event)})
                        if self._keeps(found, index):
                            yield found
            if not self.is_array and self.events_read == 0:
                self._check_has_events()

    # -- helpers ---------------------------------------------------------------------------
    def _keeps(self, span: Span, index: int) -> bool:
        """Whether `span` (ending at event #`index`) is a span of time; else it is counted."""
        if math.isfinite(span.ts) and math.isfinite(span.dur) and span.dur >= 0:
            return True
        self.left_out += 1
        if self.first_left_out is None:
            self.first_left_out = (f"event #{index} ({span.name[:60]!r}): ts {span.ts:g}, "
                                   f"dur {span.dur:g}")
        return False

    def _number(self, event: dict[str, Any], key: str, index: int) -> float:
        value = event.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TraceError(f"{self.path}: event #{index} ({str(event.get('name'))[:60]!r}) "
                             f"has no numeric {key!r}")
        return float(value)

    def _check_has_events(self) -> None:
        """An object without a `traceEvents` array is not a trace (an empty array is)."""
        with self._guard(), self._open() as stream:
            for prefix, event, value in ijson.parse(stream, buf_size=CHUNK):
                stream.mark()
                if prefix == "" and event == "map_key" and value == "traceEvents":
                    return
        raise TraceError(f"{self.path} is not a Chrome trace: no traceEvents array")

    def _open(self) -> _Bounded:
        raw: IO[bytes] = gzip.open(self.path, "rb") if self.compressed else \
            open(self.path, "rb")
        return _Bounded(raw, self.path)

    def _starts_with(self, magic: bytes) -> bool:
        try:
            with open(self.path, "rb") as stream:
                return stream.read(len(magic)) == magic
        except OSError as error:
            raise TraceError(f"cannot read {self.path}: {error.strerror}") from None

    def _first_byte(self) -> bytes:
        with self._guard(), self._open() as stream:
            while True:
                chunk = stream.read(4096)
                if not chunk:
                    return b""
                stripped = chunk.lstrip(b" \t\r\n")
                if stripped:
                    return stripped[:1]

    def _guard(self) -> _Guard:
        return _Guard(self.path)


class _Bounded:
    """The trace's (decompressed) bytes, read at most MAX_EVENT_BYTES past the last mark.

    The readers mark each event they complete (`mark()`).
    """

    def __init__(self, stream: IO[bytes], path: str) -> None:
        self.stream = stream
        self.path = path
        self.read_bytes = 0
        self.marked = 0

    def read(self, size: int = -1) -> bytes:
        if self.read_bytes - self.marked > MAX_EVENT_BYTES:
            raise TraceError(f"{self.path} is not a trace dlbs reads: more than "
                             f"{MAX_EVENT_BYTES // 2**20} MiB without a complete event (an "
                             f"event name or value that large)")
        data = self.stream.read(CHUNK if size is None or size < 0 else min(size, CHUNK))
        self.read_bytes += len(data)
        return data

    def mark(self) -> None:
        self.marked = self.read_bytes

    def __enter__(self) -> _Bounded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.close()


class _Guard:
    """Turns what reading a broken file raises into one `TraceError`."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: object) -> bool:
        if error is None or isinstance(error, TraceError):
            return False
        if isinstance(error, ijson.JSONError):
            reason = " ".join(str(error).split())[:200] or type(error).__name__
            raise TraceError(f"{self.path} is not a valid Chrome trace: malformed JSON "
                             f"({reason})") from None
        if isinstance(error, gzip.BadGzipFile | EOFError | zlib.error):
            raise TraceError(f"{self.path} is not a valid Chrome trace: broken gzip data "
                             f"({error})") from None
        if isinstance(error, UnicodeDecodeError):
            raise TraceError(f"{self.path} is not a valid Chrome trace: not UTF-8 text") from None
        if isinstance(error, OSError):
            raise TraceError(f"cannot read {self.path}: {error.strerror or error}") from None
        return False


def _args(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}
