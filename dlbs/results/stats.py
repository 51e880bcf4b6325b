"""The statistics engine: one definition of every batch-time statistic, for every backend.

Backends print their raw per-batch times (`results.time_data`, `results.warmup_time_data`,
milliseconds); dlbs computes the summary from them, the same way whatever the framework:

| key | definition |
|---|---|
| `results.time` | mean of the timed batches |
| `results.time_std` | sample standard deviation, ddof=1 (None with one batch) |
| `results.time_median`, `_p90`, `_p95`, `_p99` | percentiles (linear interpolation) |
| `results.time_min`, `results.time_max` | extremes |
| `results.time_count` | number of timed batches |
| `results.throughput` | `exp.effective_batch` x 1000 / `results.time` (instances per second) |
| `results.warmup_time`, `results.warmup_count` | mean and number of warm-up batches |
| `results.stats_warnings` | contradicted values (below), and the warnings the backend printed |

Percentiles interpolate linearly between the closest ranks (numpy's default method, R's
type 7), so the median of an even count is the mean of the two middle values.

What a backend printed itself for these keys is checked against the computed value; a
mismatch is recorded in `results.stats_warnings`, never silently replaced. A standard
deviation printed with ddof=0 (the population formula), and the throughput of one replica
printed by a backend that runs its replicas in one process, are recognised as such and are
not mismatches. Results without per-batch times (DLBS logs, LoadGen scenarios) keep what the
backend printed; `results.stats_source` says which ("dlbs" or "backend").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: Degrees of freedom subtracted in the standard deviation (the sample standard deviation).
DDOF = 1
#: Tail percentiles reported besides the median.
PERCENTILES = (90, 95, 99)

SAMPLES_KEY = "results.time_data"
WARMUP_KEY = "results.warmup_time_data"
SOURCE_KEY = "results.stats_source"
WARNINGS_KEY = "results.stats_warnings"
# Warnings a backend may print about its results besides WARNINGS_KEY; both are kept.
BACKEND_WARNINGS_KEY = "results.warnings"
# What the engine's own warnings say (check_backend_values).
CONTRADICTION = ", its per-batch times give "

# Keys the engine writes from the samples; a backend's own value of each is checked.
TIME_KEYS = ("results.time", "results.time_std", "results.time_median", "results.time_p90",
             "results.time_p95", "results.time_p99", "results.time_min", "results.time_max",
             "results.time_count")
COMPUTED_KEYS = (*TIME_KEYS, "results.throughput", "results.warmup_time",
                 "results.warmup_count", SOURCE_KEY, WARNINGS_KEY)
# Relative tolerance of the check: the backends print floats with repr (exact), so only the
# order of summation differs; 1e-6 still catches a wrong formula.
_REL_TOL = 1e-6
_ABS_TOL = 1e-9


def finite_samples(value: Any) -> np.ndarray | None:
    """`value` as a float64 array when it is a non-empty list of finite numbers >= 0, else None."""
    if not isinstance(value, list | tuple | np.ndarray) or len(value) == 0:
        return None
    if isinstance(value, list | tuple) and not all(
            isinstance(item, int | float) and not isinstance(item, bool) for item in value):
        return None
    try:
        samples = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if samples.ndim != 1 or not np.all(np.isfinite(samples)) or np.any(samples < 0):
        return None
    return samples


def sample_statistics(samples: Sequence[float] | np.ndarray) -> dict[str, float | int | None]:
    """Mean, std (ddof=1), median, percentiles, min, max and count of batch times (ms)."""
    data = np.asarray(samples, dtype=np.float64)
    if data.size == 0:
        raise ValueError("no samples")
    p50, p90, p95, p99 = (float(v) for v in np.percentile(data, (50, *PERCENTILES)))
    mean, std = mean_and_std(data)
    return {
        "results.time": mean,
        "results.time_std": std,
        "results.time_median": p50,
        "results.time_p90": p90,
        "results.time_p95": p95,
        "results.time_p99": p99,
        "results.time_min": float(data.min()),
        "results.time_max": float(data.max()),
        "results.time_count": int(data.size),
    }


def mean_and_std(data: np.ndarray) -> tuple[float, float | None]:
    """The mean and the standard deviation (ddof=1; None of one sample) of finite samples.

    Summed as they are, samples near the largest float (1e308) overflow to infinity; then
    they are summed scaled down by the largest of them, and the result scaled back up.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        mean = float(data.mean())
        std = float(data.std(ddof=DDOF)) if data.size > DDOF else None
    if math.isfinite(mean) and (std is None or math.isfinite(std)):
        return mean, std
    scale = float(np.abs(data).max())
    scaled = data / scale
    return float(scaled.mean()) * scale, \
        float(scaled.std(ddof=DDOF)) * scale if data.size > DDOF else None


def effective_batch(experiment: Mapping[str, Any]) -> int | None:
    """Instances one step processes over all replicas: exp.effective_batch (None: none).

    The planner resolved it (the configs compute it from the replica batch and the
    replicas); it is read, never computed again here.
    """
    value = experiment.get("exp.effective_batch")
    return int(value) if _is_count(value) else None


def summarize(params: Mapping[str, Any], results: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's keys for one attempt (see the module's table), from its raw results.

    `params` gives the effective batch for the throughput. With per-batch samples every
    TIME_KEYS entry is computed and the backend's values are checked; without them only
    `results.stats_source` = "backend" is returned, and the backend's values stand.
    """
    samples = finite_samples(results.get(SAMPLES_KEY))
    summary: dict[str, Any] = {}
    warmup = finite_samples(results.get(WARMUP_KEY))
    if warmup is not None:
        summary["results.warmup_time"] = mean_and_std(warmup)[0]
        summary["results.warmup_count"] = int(warmup.size)
    warnings: list[str] = []
    if samples is None:
        summary[SOURCE_KEY] = "backend"
        mean, batch = results.get("results.time"), effective_batch(params)
        if "results.throughput" not in results and _is_number(mean) and mean > 0 and batch:
            summary["results.throughput"] = batch * 1000.0 / mean   # DLBS logs print none
    else:
        summary.update(sample_statistics(samples))
        batch = effective_batch(params)
        mean = summary["results.time"]
        if batch is not None and mean > 0:
            summary["results.throughput"] = batch * 1000.0 / mean
        summary[SOURCE_KEY] = "dlbs"
        warnings = check_backend_values(results, summary, samples,
                                        params.get("exp.num_replicas"))
    warnings = [*backend_warnings(results), *warnings]
    if warnings:
        summary[WARNINGS_KEY] = list(dict.fromkeys(warnings))
    return summary


def backend_warnings(results: Mapping[str, Any]) -> list[str]:
    """The warnings the backend printed itself (`results.stats_warnings`, `results.warnings`).

    They are kept beside the engine's, never replaced by them: the results store keeps the
    list in a column of its own and flags it, so a report finds every warning of 100,000
    attempts without reading their summaries, and shows each beside its row.
    """
    found: list[str] = []
    for key in (WARNINGS_KEY, BACKEND_WARNINGS_KEY):
        value = results.get(key)
        items = value if isinstance(value, list | tuple) else [] if value in (None, "") \
            else [value]
        found.extend(str(item) for item in items if str(item))
    return found


def is_contradiction(text: str) -> bool:
    """Whether a warning is the engine's: a printed value its per-batch times contradict."""
    return CONTRADICTION in text


def check_backend_values(printed: Mapping[str, Any], computed: Mapping[str, Any],
                         samples: np.ndarray, replicas: Any = None) -> list[str]:
    """A message for each summary value the backend printed that the samples contradict.

    A throughput of one replica (`replicas`: exp.num_replicas), which a backend that runs
    its replicas in one process may print, is a convention, not a contradiction.
    """
    warnings = []
    for key in (*TIME_KEYS, "results.throughput"):
        theirs = printed.get(key)
        ours = computed.get(key)
        if theirs is None or ours is None or not _is_number(theirs):
            continue
        if _close(float(theirs), float(ours)):
            continue
        if key == "results.time_std" and samples.size > 1 and \
                _close(float(theirs), _population_std(samples)):
            continue  # the population formula (ddof=0): a convention, not a wrong number
        if key == "results.throughput" and _is_count(replicas) and \
                _close(float(theirs) * int(replicas), float(ours)):
            continue  # one replica's throughput: a convention, not a wrong number
        warnings.append(f"{key}: the backend printed {theirs!r}{CONTRADICTION}"
                        f"{_short(float(ours))}")
    return warnings


def _population_std(samples: np.ndarray) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        return float(samples.std(ddof=0))


def pack_samples(samples: np.ndarray | None) -> bytes | None:
    """Per-batch times as the store keeps them: little-endian float64, None for none."""
    if samples is None:
        return None
    return np.ascontiguousarray(samples, dtype="<f8").tobytes()


def unpack_samples(blob: bytes | None) -> np.ndarray | None:
    """The inverse of `pack_samples` (a read-only view on the bytes)."""
    if blob is None:
        return None
    return np.frombuffer(blob, dtype="<f8")


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=_REL_TOL, abs_tol=_ABS_TOL)


def _short(value: float) -> str:
    return f"{value:.6g}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
