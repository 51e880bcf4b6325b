"""Summaries of the resource monitor's series over the timed interval of an experiment.

The monitor (docs/monitor.md) stores `results.use.<series>`: one value per sample, with
`results.use.time` the seconds since it started, which is when the backend's process
started (the attempt's `started_at`, a few milliseconds earlier). The timed batches run
between the backend's marks `results.timed_start` and `results.timed_end`; a backend that
marks neither (an older one, DLBS's logs) ran them in the last `sum(results.time_data)`
milliseconds before its `results.end_time`. The summaries use the samples taken inside that
interval, so start-up, compilation and warm-up do not dilute them. When the interval cannot
be placed (no marks and no end time or per-batch times, no start time) or holds no sample,
the whole run is summarised, and `results.use.interval` says which was used.

Keys, for each series (`cpu`, `rss`, `gpu_util`, `gpu_mem`, `gpu_power`, and any other the
monitor adds, except the energy counters `*energy`, which energy.py reads):
`results.use.<series>_mean` and `results.use.<series>_max`; NaN samples (a failed query)
are left out. Plus `results.use.interval` ("timed" or "whole run"),
`results.use.samples` (how many samples were summarised) and, when the interval could be
placed, `results.use.timed_start` and `results.use.timed_end` (seconds on the monitor's
clock; charts shade it).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import numpy as np

PREFIX = "results.use."
TIME_SERIES = "results.use.time"
TIMED = "timed"
WHOLE_RUN = "whole run"
#: The backend's marks of its timed interval (benchmark_common/timed_marks.py).
TIMED_START = "results.timed_start"
TIMED_END = "results.timed_end"
#: The suffix of the monitor's energy counters: differences of them are energy, not levels.
COUNTER_SUFFIX = "energy"


def series_names(results: Mapping[str, Any]) -> list[str]:
    """The monitor's series in `results` (without the prefix), `time` and counters excluded."""
    return [key[len(PREFIX):] for key, value in results.items()
            if key.startswith(PREFIX) and key != TIME_SERIES and isinstance(value, list)
            and not key.endswith(COUNTER_SUFFIX)
            and value and all(_is_number_or_none(item) for item in value)]


def marked_interval(results: Mapping[str, Any],
                    started_at: str | None) -> tuple[float, float] | None:
    """The backend's marks as (start, end) in seconds of the monitor's clock, or None."""
    start, end = _timestamp(results.get(TIMED_START)), _timestamp(results.get(TIMED_END))
    zero = _timestamp(started_at)
    if start is None or end is None or zero is None or end < start:
        return None
    return start - zero, end - zero


def timed_interval(results: Mapping[str, Any],
                   started_at: str | None) -> tuple[float, float] | None:
    """The timed batches as (start, end) in seconds of the monitor's clock, or None.

    The backend's marks when it printed them, else placed from its end time and batch times.
    """
    marked = marked_interval(results, started_at)
    if marked is not None:
        return marked
    end = _timestamp(results.get("results.end_time"))
    start = _timestamp(started_at)
    batches = results.get("results.time_data")
    if end is None or start is None or not isinstance(batches, list) or not batches:
        return None
    try:
        timed_s = float(np.sum(np.asarray(batches, dtype=np.float64))) / 1000.0
    except (TypeError, ValueError):
        return None
    end_s = end - start
    if not np.isfinite(timed_s) or end_s <= 0:
        return None
    return max(0.0, end_s - timed_s), end_s


def summarize(results: Mapping[str, Any], started_at: str | None) -> dict[str, Any]:
    """Mean and maximum of every monitor series over the timed interval (see the module)."""
    names = series_names(results)
    times = results.get(TIME_SERIES)
    if not names or not isinstance(times, list) or not times:
        return {}
    clock = np.asarray([np.nan if t is None else t for t in times], dtype=np.float64)
    interval = timed_interval(results, started_at)
    chosen = np.ones(clock.size, dtype=bool)
    used = WHOLE_RUN
    if interval is not None:
        inside = (clock >= interval[0]) & (clock <= interval[1])
        if inside.any():
            chosen, used = inside, TIMED
    summary: dict[str, Any] = {f"{PREFIX}interval": used,
                               f"{PREFIX}samples": int(chosen.sum())}
    if interval is not None:
        summary[f"{PREFIX}timed_start"], summary[f"{PREFIX}timed_end"] = interval
    for name in names:
        values = np.asarray([np.nan if v is None else v for v in results[PREFIX + name]],
                            dtype=np.float64)
        if values.size != clock.size:
            continue  # not aligned with the clock: not a series of this monitor
        picked = values[chosen]
        picked = picked[np.isfinite(picked)]
        if picked.size == 0:
            continue
        summary[f"{PREFIX}{name}_mean"] = float(picked.mean())
        summary[f"{PREFIX}{name}_max"] = float(picked.max())
    return summary


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None  # a local time without a zone cannot be placed on the monitor's clock
    return moment.timestamp()


def _is_number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))
