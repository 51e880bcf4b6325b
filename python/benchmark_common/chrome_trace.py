"""Writing a traced pass's Chrome trace (docs/tracing.md), the same way in every backend.

The file is gzip-compressed JSON: `{"dlbs": <metadata>, "displayTimeUnit": "ms",
"traceEvents": [...]}`, the metadata first so that a reader finds it without reading the
events, written event by event to a temporary file beside the target and renamed over it, so
that a failure leaves nothing at the path but what was there. JSON has no NaN or Infinity:
such a number in an event becomes null. `nest_spans` gives the spans the traced pass timed
itself what the views read from their `args` (their batch; a layer span its parent and
depth), from how they nest. Standard library only, Python 3.8+.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
from typing import Any, Callable, Dict, Iterable, List, Tuple  # noqa: UP035 - Python 3.8 too

#: The trace file's format version (the `format` key of its metadata).
FORMAT_VERSION = 1
#: The categories of the spans the traced pass times itself.
STEP, PHASE, LAYER = "dlbs.step", "dlbs.phase", "dlbs.layer"
SPAN_CATEGORIES = (STEP, PHASE, LAYER)

#: A parent sorts before a child that starts at the same time (steps hold phases hold layers).
SPAN_ORDER = {STEP: 0, PHASE: 1, LAYER: 2}
#: Timestamps are microseconds with three decimals: spans that nest may differ by rounding.
EPSILON_US = 0.002

Event = Dict[str, Any]  # noqa: UP006


def span_end(event: Event) -> float:
    """When a complete ("X") event ends, microseconds."""
    return event["ts"] + event["dur"]


def is_span(event: Event) -> bool:
    """A complete event with a numeric start and duration."""
    return event.get("ph") == "X" and isinstance(event.get("ts"), (int, float)) and \
        isinstance(event.get("dur"), (int, float))


def spans_by_thread(events: Iterable[Event], wanted: Callable[[Event], bool]
                    ) -> Dict[Tuple[Any, Any], List[Event]]:  # noqa: UP006
    """The `wanted` spans of each (pid, tid), each thread's sorted as they nest."""
    by_thread: Dict[Tuple[Any, Any], List[Event]] = {}  # noqa: UP006
    for event in events:
        if is_span(event) and wanted(event):
            by_thread.setdefault((event.get("pid"), event.get("tid")), []).append(event)
    for spans in by_thread.values():
        spans.sort(key=lambda e: (e["ts"], -e["dur"], SPAN_ORDER.get(e.get("cat"), 3)))
    return by_thread


def nest_spans(events: List[Event], layers: Dict[str, Dict[str, str]]) -> None:  # noqa: UP006
    """The batch, parent and depth of the traced pass's spans, from how they nest.

    Every step span gets its `batch` (0, 1, ...), and every phase and layer span inside one
    the same; every layer span its `parent` (the enclosing layer span's name, "" at the
    top), its `depth` and what `layers` says of its name (the module's type and path).
    """
    for spans in spans_by_thread(events, lambda e: e.get("cat") in SPAN_CATEGORIES).values():
        open_spans: List[Event] = []  # noqa: UP006
        batch = -1
        for span in spans:
            while open_spans and span["ts"] >= span_end(open_spans[-1]) - EPSILON_US:
                open_spans.pop()
            while open_spans and span_end(span) > span_end(open_spans[-1]) + EPSILON_US:
                open_spans.pop()  # overlaps without nesting: not its parent
            args = span.setdefault("args", {})
            if span["cat"] == STEP:
                batch += 1
                args["batch"] = batch
            elif batch >= 0 and any(outer["cat"] == STEP for outer in open_spans):
                args["batch"] = batch
            if span["cat"] == LAYER:
                enclosing = [outer for outer in open_spans if outer["cat"] == LAYER]
                args["parent"] = enclosing[-1]["name"] if enclosing else ""
                args["depth"] = len(enclosing)
                args.update(layers.get(span["name"], {}))
            open_spans.append(span)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def _dumps(event: Event) -> str:
    try:
        return json.dumps(event, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(event), allow_nan=False)


def write_trace(path: str, meta: Event, events: Iterable[Event]) -> None:
    """Write the trace (module doc); `meta` gets the format version."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                         dir=folder)
    try:
        with os.fdopen(handle, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as packed:
                packed.write(f'{{"dlbs": {_dumps({"format": FORMAT_VERSION, **meta})}, '
                             f'"displayTimeUnit": "ms", "traceEvents": [\n'.encode())
                first = True
                for event in events:
                    packed.write((("" if first else ",\n") + _dumps(event)).encode())
                    first = False
                packed.write(b"\n]}\n")
            raw.flush()
            os.fsync(raw.fileno())
        os.chmod(temporary, 0o644)  # as the experiment's log (mkstemp makes 0600)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
