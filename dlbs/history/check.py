"""Regressions: the newest point of a series against its lookback window (Conbench's method).

For each configuration, the *window* is the up to `window` points before its newest one.
With their mean m and sample standard deviation s (ddof=1), the newest value x has the
z-score z = (x - m) / s. The newest point is a **regression** when it is worse than m (slower
for times, lower for throughput) by more than `min_change` (a fraction of m) *and* |z| is at
least `z`; it is an **improvement** when the same holds the other way. The two tests together
keep a noisy configuration from alerting on noise (z) and a very steady one from alerting on
a change nobody would care about (min_change). A window of fewer than `min_points` points
cannot tell: the verdict says so. A window with s = 0 has z = +-inf for any change, so only
min_change decides there.

Conbench (conbench/conbench, `conbench.entities.compare` and its "lookback z-score") compares
each result with the distribution of the same benchmark's results over a lookback window of
earlier commits, and flags |z| beyond a threshold; dlbs does the same per configuration and
run tag, and adds the minimum change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dlbs.history.series import History, Series

REGRESSION, IMPROVEMENT, STEADY, TOO_FEW = "regression", "improvement", "steady", "too few"
MIN_POINTS = 3


@dataclass(frozen=True)
class Verdict:
    """The newest point of one series against its window."""

    series: Series
    status: str
    window: int                    # points in the window
    mean: float | None
    std: float | None
    latest: float
    change: float | None           # (latest - mean) / mean
    z: float | None


def check(history: History, window: int = 20, z: float = 3.0, min_change: float = 0.05,
          min_points: int = MIN_POINTS) -> list[Verdict]:
    """A verdict for every series of `history` (see the module)."""
    higher = history.higher_is_better
    verdicts = []
    for series in history.series:
        latest = float(series.values[-1])
        earlier = series.values[:-1][-window:] if window > 0 else series.values[:0]
        if len(earlier) < max(min_points, 2):
            verdicts.append(Verdict(series, TOO_FEW, len(earlier), None, None, latest, None,
                                    None))
            continue
        mean = float(np.mean(earlier))
        std = float(np.std(earlier, ddof=1))
        delta = latest - mean
        change = delta / mean if mean else (math.inf if delta else 0.0)
        score = delta / std if std > 0 else (math.copysign(math.inf, delta) if delta else 0.0)
        worse = delta < 0 if higher else delta > 0
        status = STEADY
        if abs(change) > min_change and abs(score) >= z:
            status = REGRESSION if worse else IMPROVEMENT
        verdicts.append(Verdict(series, status, len(earlier), mean, std, latest, change,
                                score))
    return verdicts
