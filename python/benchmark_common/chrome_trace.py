"""Writing a traced pass's Chrome trace (docs/tracing.md), the same way in every backend.

The file is gzip-compressed JSON: `{"dlbs": <metadata>, "displayTimeUnit": "ms",
"traceEvents": [...]}`, the metadata first so that a reader finds it without reading the
events, written event by event to a temporary file beside the target and renamed over it, so
that a failure leaves nothing at the path but what was there. JSON has no NaN or Infinity:
such a number in an event becomes null. Standard library only, Python 3.8+.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
from typing import Any, Dict, Iterable  # noqa: UP035 - Python 3.8 too

#: The trace file's format version (the `format` key of its metadata).
FORMAT_VERSION = 1
#: The categories of the spans the traced pass times itself.
STEP, PHASE, LAYER = "dlbs.step", "dlbs.phase", "dlbs.layer"
SPAN_CATEGORIES = (STEP, PHASE, LAYER)

Event = Dict[str, Any]  # noqa: UP006


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
