"""Scaling: the GPU (or replica) count of an experiment, and speedup and efficiency.

weak scaling (same replica batch): speedup = throughput(N) / throughput(1), efficiency =
t1 / tN; strong scaling (same effective batch): speedup = t1 / tN, efficiency =
t1 / (N x tN); both efficiencies in percent, never capped at 100. N = 1 is the baseline of
each row; a row without it has no speedup or efficiency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dlbs.results.columns import Attempts

# The column axis of scaling reports: GPUs, or replicas (nodes) on CPU.
SCALE = "scale"


def scales(attempts: Attempts, rows: np.ndarray) -> np.ndarray:
    """The GPU count of the attempts `rows`; on CPU (0 GPUs) the replicas (DLBS's nodes)."""
    found = np.zeros(len(rows), dtype=np.int64)
    for key in ("exp.num_gpus", "exp.num_replicas", "exp.num_nodes"):
        column = attempts.column(key)
        counts = np.array([count(value) for value in column.values], dtype=np.int64)
        found = np.where(found > 0, found, counts[column.codes[rows]])
    return np.where(found > 0, found, 1)


@dataclass(frozen=True)
class Cells:
    """Per cell of a scaling report: its values and its row's one-GPU cell's.

    Its batch time and throughput, its GPU count, and the batch time and throughput of its
    row's one-GPU (one-replica) cell (NaN: none).
    """

    time: np.ndarray
    throughput: np.ndarray
    scale: np.ndarray
    t1: np.ndarray
    x1: np.ndarray


def against_one(row: np.ndarray, scale: np.ndarray, time: np.ndarray,
                throughput: np.ndarray) -> Cells:
    """Each cell with its row's one-GPU cell (per cell: its row's number, its GPU count)."""
    base = np.full(int(row.max(initial=-1)) + 1, -1, dtype=np.intp)
    ones = np.flatnonzero(scale == 1)[::-1]
    rows_with_one, last = np.unique(row[ones], return_index=True)
    base[rows_with_one] = ones[last]     # a row's last such cell, as a dict would keep it
    has_base = base[row] >= 0
    where = np.where(has_base, base[row], 0)
    return Cells(time, throughput, scale, np.where(has_base, time[where], np.nan),
                 np.where(has_base, throughput[where], np.nan))


def weak_values(cells: Cells) -> tuple[np.ndarray, np.ndarray]:
    """Weak scaling's speedup and efficiency (the module); NaN without a baseline or value.

    Same replica batch: N times the work per step, ideally in the same time.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        speedup = np.where(_positive(cells.throughput) & _positive(cells.x1),
                           cells.throughput / cells.x1, np.nan)
        efficiency = np.where(_usable(cells), 100.0 * cells.t1 / cells.time, np.nan)
    return speedup, efficiency


def strong_values(cells: Cells) -> tuple[np.ndarray, np.ndarray]:
    """Strong scaling's speedup and efficiency (the module); NaN without a baseline or value.

    Same effective batch: the work of a step is split N ways.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        usable = _usable(cells)
        speedup = np.where(usable, cells.t1 / cells.time, np.nan)
        efficiency = np.where(usable, 100.0 * cells.t1 / (cells.scale * cells.time), np.nan)
    return speedup, efficiency


def _usable(cells: Cells) -> np.ndarray:
    return _positive(cells.time) & (cells.t1 != 0) & ~np.isnan(cells.t1)


def _positive(values: np.ndarray) -> np.ndarray:
    return ~np.isnan(values) & (values > 0)


def scale_label(devices: set[str]) -> str:
    """What the column axis counts: GPUs, or replicas (nodes) when everything ran on CPU."""
    if devices == {"cpu"}:
        return "replicas"
    if "cpu" in devices:
        return "GPUs (replicas on CPU)"
    return "GPUs"


def count(value: Any) -> int:
    """A positive integer (also from 2.0 or "2"), else 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else 0
