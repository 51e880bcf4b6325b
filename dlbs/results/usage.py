"""Summaries of the resource monitor's series over the timed interval of an experiment.

The monitor (docs/monitor.md) stores `results.use.<series>`: one value per sample, with
`results.use.time` the seconds since it started, which is when the backend's process
started (the attempt's `started_at`, a few milliseconds earlier). The timed batches are the
last `sum(results.time_data)` milliseconds before the backend's `results.end_time`; the
summaries use the samples taken inside that interval, so start-up, compilation and warm-up
do not dilute them. When the interval cannot be placed (no end time, no per-batch times, no
start time) or holds no sample, the whole run is summarised, and `results.use.interval`
says which was used.

Keys, for each series (`cpu`, `rss`, `gpu_util`, `gpu_mem`, `gpu_power`, and any other the
monitor adds): `results.use.<series>_mean` and `results.use.<series>_max`; NaN samples (a
failed nvidia-smi query) are left out. Plus `results.use.interval` ("timed" or "whole run"),
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


def series_names(results: Mapping[str, Any]) -> list[str]:
    """The monitor's series in `results` (without the prefix), `time` excluded."""
    return [key[len(PREFIX):] for key, value in results.items()
            if key.startswith(PREFIX) and key != TIME_SERIES and isinstance(value, list)
            and value and all(_is_number_or_none(item) for item in value)]


def timed_interval(results: Mapping[str, Any],
                   started_at: str | None) -> tuple[float, float] | None:
    """The timed batches as (start, end) in seconds of the monitor's clock, or None."""
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
