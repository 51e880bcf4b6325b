"""The log protocol a backend prints (docs/backends/protocol.md): ``__<key>__=<json>`` lines.

Shared by every backend (Python 3.8+; the standard library, and numpy for
`time_statistics` only, so the dummy backend and the evaluation harness use it without
numpy). The statistics are the backend's own summary (population std); dlbs recomputes them
from ``results.time_data`` and checks these against its own (docs/reports.md). A progress
note (`progress`) tells whoever watches a long run how far it has come; it is not a result
(docs/backends/protocol.md section 3).
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from typing import Any, TextIO


def emit(key: str, value: Any, stream: TextIO | None = None) -> None:
    """Print ``__key__=json`` and flush, so a killed process still leaves what it printed."""
    out = stream or sys.stdout
    out.write(f"__{key}__={json.dumps(value)}\n")
    out.flush()


def now_iso() -> str:
    """The current UTC time, ISO-8601."""
    # datetime.UTC is Python 3.11+; this package runs on 3.8 too.
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")  # noqa: UP017


def time_statistics(times_ms: list[float]) -> dict[str, float]:
    """Mean, std, median and tail percentiles of per-batch times (milliseconds)."""
    import numpy as np

    data = np.asarray(times_ms, dtype=np.float64)
    return {
        "results.time": float(data.mean()),
        "results.time_std": float(data.std()),
        "results.time_median": float(np.median(data)),
        "results.time_p90": float(np.percentile(data, 90)),
        "results.time_p95": float(np.percentile(data, 95)),
        "results.time_p99": float(np.percentile(data, 99)),
    }


def emit_progress(message: str, **fields: Any) -> None:
    """A progress note: `message` (one line for people) and `fields` (for programs)."""
    emit("progress", {"message": message, **fields})


def emit_failure(message: str, stream: TextIO | None = None) -> None:
    """The lines that mark a run failed; no throughput is printed."""
    emit("results.status", "failure", stream)
    emit("results.status_msg", message, stream)
    emit("results.end_time", now_iso(), stream)


def refuse(message: str) -> None:
    """A user error: the failure lines and one ``benchmarks.py: error:`` line on stderr.

    The message is joined into one line; no traceback is printed (the message says all).
    """
    one_line = " ".join(message.split())
    emit_failure(one_line)
    print(f"benchmarks.py: error: {one_line}", file=sys.stderr, flush=True)
