"""Scaling: the GPU (or replica) count of an experiment, and speedup and efficiency.

weak scaling (same replica batch): speedup = throughput(N) / throughput(1), efficiency =
t1 / tN; strong scaling (same effective batch): speedup = t1 / tN, efficiency =
t1 / (N x tN); both efficiencies in percent, never capped at 100. N = 1 is the baseline of
each row; a row without it has no speedup or efficiency.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from dlbs.report.metrics import EFFICIENCY, SPEEDUP, THROUGHPUT, TIME


def scale_of(experiment: dict[str, Any]) -> int:
    """The GPU count; on CPU (0 GPUs) the replica count, i.e. the nodes (DLBS's definition)."""
    return count(experiment.get("exp.num_gpus")) or \
        count(experiment.get("exp.num_replicas")) or \
        count(experiment.get("exp.num_nodes")) or 1


def add_scaling(kind: str, rows: Iterable[dict[Any, Any]]) -> None:
    """Speedup and efficiency of every cell against its row's one-GPU (one-replica) cell.

    `rows` map a GPU count to a cell; `kind` is "weak" or "strong".
    """
    for cells in rows:
        base = cells.get(1)
        if base is None:
            continue
        t1, x1 = base.values.get(TIME), base.values.get(THROUGHPUT)
        for scale, cell in cells.items():
            tn, xn = cell.values.get(TIME), cell.values.get(THROUGHPUT)
            if kind == "weak":
                # Same replica batch: N times the work per step, ideally in the same time.
                cell.values[SPEEDUP] = xn / x1 if positive(xn) and positive(x1) else None
                cell.values[EFFICIENCY] = 100.0 * t1 / tn if positive(tn) and t1 else None
            else:
                # Same effective batch: the work of a step is split N ways.
                cell.values[SPEEDUP] = t1 / tn if positive(tn) and t1 else None
                cell.values[EFFICIENCY] = (100.0 * t1 / (scale * tn)
                                           if positive(tn) and t1 else None)


def scale_label(devices: set[str]) -> str:
    """What the column axis counts: GPUs, or replicas (nodes) when everything ran on CPU."""
    if devices == {"cpu"}:
        return "replicas"
    if "cpu" in devices:
        return "GPUs (replicas on CPU)"
    return "GPUs"


def positive(value: Any) -> bool:
    """A finite number above 0 (not a bool)."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def count(value: Any) -> int:
    """A positive integer (also from 2.0 or "2"), else 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else 0
