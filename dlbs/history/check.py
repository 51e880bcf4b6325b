"""Regressions: the newest point of a series against its lookback window (Conbench's method).

For each configuration, the *window* is the up to `window` points before its newest one.
With their mean m and sample standard deviation s (ddof=1), the newest value x has the
z-score z = (x - m) / s. The newest point is a **regression** when it is worse than m (slower
for times, lower for throughput) by more than `min_change` (a fraction of m) *and* |z| is at
least `z`; it is an **improvement** when the same holds the other way. The two tests together
keep a noisy configuration from alerting on noise (z) and a very steady one from alerting on
a change nobody would care about (min_change). A window of fewer than `min_points` points
cannot tell: the verdict says so. A window with s = 0 has z = +-inf for any change, so only
min_change decides there. A configuration whose newest run has no point (it failed, or gave
no valid value: series.py) is **failed**: a gate never passes a run it could not judge.

Conbench (conbench/conbench, `conbench.entities.compare` and its "lookback z-score") compares
each result with the distribution of the same benchmark's results over a lookback window of
earlier commits, and flags |z| beyond a threshold; dlbs does the same per configuration and
run tag, and adds the minimum change.

`judge` computes every configuration at once (arrays: 100,000 configurations in a few
milliseconds); `check` makes a `Verdict` of each, and `verdict` of one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dlbs.errors import ResultsError
from dlbs.history.series import History, Series

REGRESSION, IMPROVEMENT, STEADY, TOO_FEW = "regression", "improvement", "steady", "too few"
FAILED = "failed"
STATUSES = (REGRESSION, FAILED, IMPROVEMENT, STEADY, TOO_FEW)
# What fails a gate.
FAILING = (REGRESSION, FAILED)
MIN_POINTS = 3


@dataclass(frozen=True)
class Settings:
    """What a check judges by (the options of `dlbs history --check`)."""

    window: int = 20
    z: float = 3.0
    min_change: float = 0.05
    min_points: int = MIN_POINTS

    def __post_init__(self) -> None:
        if not self.window >= 1:
            raise ResultsError(f"--window {self.window}: the window holds at least 1 run")
        if not (math.isfinite(self.z) and self.z >= 0):
            raise ResultsError(f"--z {self.z}: a z-score threshold is a number >= 0",
                               hint="e.g. --z 3")
        if not (math.isfinite(self.min_change) and self.min_change >= 0):
            raise ResultsError(f"--min-change {self.min_change * 100:g}%: the smallest change that "
                               "counts is a fraction >= 0", hint="e.g. --min-change 5%")


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


@dataclass(frozen=True)
class Judgement:
    """Every configuration's verdict as arrays (NaN: none); `status` codes into STATUSES."""

    status: np.ndarray
    window: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    latest: np.ndarray
    change: np.ndarray
    z: np.ndarray

    def count(self, status: str) -> int:
        """How many configurations have `status`."""
        return int((self.status == STATUSES.index(status)).sum())

    @property
    def failing(self) -> int:
        """How many configurations fail the gate."""
        return sum(self.count(status) for status in FAILING)


def judge(history: History, settings: Settings = Settings()) -> Judgement:
    """Every configuration of `history` judged at once (see the module)."""
    sizes = np.diff(history.starts)
    count = len(sizes)
    values = history.values
    group = np.repeat(np.arange(count), sizes)
    position = np.arange(len(values)) - np.repeat(history.starts[:-1], sizes)
    earlier = np.minimum(sizes - 1, settings.window)
    newest = sizes - 1
    in_window = (position < newest[group]) & (position >= (newest - earlier)[group])
    members = group[in_window]
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.bincount(members, values[in_window], count) / earlier
        deviations = values[in_window] - mean[members]
        std = np.sqrt(np.bincount(members, deviations * deviations, count) / (earlier - 1))
    latest = values[history.starts[1:] - 1] if count else np.zeros(0)
    delta = latest - mean
    with np.errstate(divide="ignore", invalid="ignore"):
        change = np.where(mean != 0, delta / mean, np.copysign(np.inf, delta))
        score = np.where(std > 0, delta / std, np.copysign(np.inf, delta))
    change[delta == 0] = 0.0
    score[delta == 0] = 0.0
    worse = delta > 0 if not history.higher_is_better else delta < 0
    beyond = (np.abs(change) > settings.min_change) & (np.abs(score) >= settings.z)
    status = np.full(count, STATUSES.index(STEADY), dtype=np.intp)
    status[beyond & worse] = STATUSES.index(REGRESSION)
    status[beyond & ~worse] = STATUSES.index(IMPROVEMENT)
    too_few = earlier < max(settings.min_points, 2)
    status[too_few] = STATUSES.index(TOO_FEW)
    for item in (mean, std, change, score):
        item[too_few] = np.nan
    if history.problems:
        status[list(history.problems)] = STATUSES.index(FAILED)
    return Judgement(status, np.maximum(earlier, 0), mean, std, latest, change, score)


def verdict(history: History, judgement: Judgement, index: int) -> Verdict:
    """Configuration `index`'s verdict as an object."""
    def number(values: np.ndarray) -> float | None:
        value = float(values[index])
        return None if math.isnan(value) else value

    return Verdict(history.one(index), STATUSES[judgement.status[index]],
                   int(judgement.window[index]), number(judgement.mean),
                   number(judgement.std), float(judgement.latest[index]),
                   number(judgement.change), number(judgement.z))


def check(history: History, window: int = 20, z: float = 3.0, min_change: float = 0.05,
          min_points: int = MIN_POINTS) -> list[Verdict]:
    """A verdict for every series of `history` (see the module)."""
    judgement = judge(history, Settings(window, z, min_change, min_points))
    history.series   # noqa: B018 (makes every series at once, faster than one by one)
    return [verdict(history, judgement, index) for index in range(history.size)]
