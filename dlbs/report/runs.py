"""Runs of one experiment that disagree.

A report shows one run per cell (select.py), never a mean of several: LoadGen's percentiles
and rates of two runs cannot be averaged into a number either run measured. When an
experiment has several ok runs, a shown value is checked against the same value of its
other runs: they **disagree** when they differ by more than the larger of the runs' spreads
and by more than `THRESHOLD` (the threshold below which `dlbs compare` calls a change
"same"), relative to the smaller value.

A run's spread, relative to its value:
- batch times and throughput: the batch-time standard deviation over the mean batch time;
- LoadGen latencies and query rates: (p90 - p50) / p50 of its latencies;
- anything else (accuracy, counts): none, so only the threshold applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dlbs.report.identity import numbers_of
from dlbs.report.metrics import COMPUTED, Metric, value_numbers
from dlbs.report.select import Selection
from dlbs.results.columns import Attempts

THRESHOLD = 0.03
TIME, TIME_STD = "results.time", "results.time_std"
P50, P90 = "results.latency_p50", "results.latency_p90"


@dataclass(frozen=True)
class Disagreement:
    """One value that differs between the runs of an experiment beyond their spread."""

    metric: Metric
    values: list[tuple[int, float]]   # (run number, value), oldest run first

    def describe(self) -> str:
        """`latency p50 (ms) 439.98 (run 1), 5.66 (run 2)`."""
        from dlbs.report.numbers import significant

        shown = ", ".join(f"{significant(value)} (run {run})" for run, value in self.values)
        return f"{self.metric.title} {shown}"


def spreads(attempts: Attempts, key: str) -> np.ndarray:
    """Each attempt's relative spread of `key` (see the module), 0 where none is known."""
    if key.startswith(("results.latency_", "results.qps", "results.max_qps")):
        low, high = numbers_of(attempts, P50), numbers_of(attempts, P90)
    elif key.startswith(("results.time", "results.throughput", "results.warmup_time",
                         "throughput_median", "results.data_wait")):
        low, high = numbers_of(attempts, TIME), numbers_of(attempts, TIME) + numbers_of(
            attempts, TIME_STD)
    else:
        return np.zeros(attempts.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = (high - low) / low
    return np.where(np.isfinite(spread) & (spread > 0), spread, 0.0)


def disagreements(selection: Selection, metrics: Sequence[Metric]) -> dict[int, list[
        Disagreement]]:
    """Per unit (cell) whose experiment's runs disagree, in what (see the module)."""
    assert selection.runs is not None and selection.run_starts is not None \
        and selection.run_of is not None
    attempts, runs, starts = selection.attempts, selection.runs, selection.run_starts
    if not (np.diff(starts) > 1).any():
        return {}
    firsts = starts[:-1]
    by_experiment: dict[int, list[Disagreement]] = {}
    for item in metrics:
        if not item.key.startswith("results.") and item.key not in COMPUTED:
            continue
        values = value_numbers(attempts, item.key)[runs]
        known = ~np.isnan(values)
        counted = np.add.reduceat(known.astype(np.intp), firsts)
        low = np.fmin.reduceat(values, firsts)
        high = np.fmax.reduceat(values, firsts)
        spread = np.fmax.reduceat(np.where(known, spreads(attempts, item.key)[runs], 0.0),
                                  firsts)
        with np.errstate(invalid="ignore"):
            differ = (counted > 1) & (high - low > np.fmax(spread, THRESHOLD) * np.abs(low))
        for experiment in np.flatnonzero(differ).tolist():
            mine = values[starts[experiment]:starts[experiment + 1]].tolist()
            by_experiment.setdefault(experiment, []).append(Disagreement(item, [
                (run + 1, value) for run, value in enumerate(mine) if value == value]))
    return {unit: by_experiment[experiment]
            for unit, experiment in enumerate(selection.run_of.tolist())
            if experiment in by_experiment}
