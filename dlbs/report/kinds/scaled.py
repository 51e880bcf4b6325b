"""What weak and strong scaling reports share: the GPU count as the column axis.

Per row, each cell's speedup and efficiency against the row's one-GPU cell (scaling.py);
on CPU the axis counts replicas (DLBS's nodes). An experiment needs a model, a replica
batch and a batch time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlbs.report.identity import column_of, numbers_of, per_code
from dlbs.report.keys import ValuesOf
from dlbs.report.kinds.base import ReportKind
from dlbs.report.metrics import EFFICIENCY, SPEEDUP, THROUGHPUT, TIME, CellValues, Metric
from dlbs.report.options import Options
from dlbs.report.scaling import SCALE, Cells, against_one, count, scale_label
from dlbs.report.select import Selection, as_text
from dlbs.results.columns import Attempts


@dataclass(frozen=True)
class Scaling(ReportKind):
    """A scaling report; `values` gives speedup and efficiency (scaling.weak_values, ...)."""

    values: Callable[[Cells], tuple[np.ndarray, np.ndarray]] | None = None
    # What its rows keep across GPU counts ("the replica batch"), and the kind that keeps
    # the other batch: a hint when no row has two GPU counts.
    keeps: str = ""
    other: str = ""
    default_metrics: tuple[str, ...] = (TIME, THROUGHPUT, SPEEDUP, EFFICIENCY)
    chart: str = "scaling"
    scaling: bool = True

    def _needs(self, metrics: Sequence[Metric]) -> list[str]:
        return ["a model", "a replica batch", "a batch time"]

    def _lacking(self, selection: Selection, metrics: Sequence[Metric]) -> np.ndarray:
        attempts = selection.attempts
        shown = selection.members
        batches = column_of(attempts, "exp.replica_batch")
        times = numbers_of(attempts, TIME)[shown]
        return np.stack([~self._with_model(attempts, shown),
                         per_code(batches, count, np.int64)[batches.codes[shown]] <= 0,
                         ~(times > 0)])

    def column_key(self, options: Options, attempts: Attempts, rows: np.ndarray) -> str:
        return SCALE

    def needed(self) -> tuple[str, ...]:
        return (TIME, THROUGHPUT)

    def derived(self, row: np.ndarray, scale: np.ndarray,
                values: dict[str, CellValues]) -> dict[str, CellValues]:
        assert self.values is not None
        speedup, efficiency = self.values(against_one(row, scale, values[TIME].numbers,
                                                      values[THROUGHPUT].numbers))
        return {SPEEDUP: CellValues(speedup), EFFICIENCY: CellValues(efficiency)}

    def notes(self, cells: Any, values_of: ValuesOf) -> list[str]:
        """A hint when every row has one GPU count: nothing to scale, maybe the other kind."""
        if cells is None or cells.axis is None or not len(cells.axis):
            return []
        if len(cells.axis) == 1:
            # A sweep of batches or models on one GPU count (issue 33.7: one point, no word).
            return [f"Every experiment ran on one GPU count ({cells.axis[0]}): there is "
                    "nothing to scale, so no speedup or efficiency but 1 (sweep exp.gpus; "
                    "--type regular compares these experiments)."]
        spots = np.unique(cells.row.astype(np.int64) * len(cells.axis) + cells.place)
        if len(np.unique(spots // len(cells.axis))) < len(spots):
            return []
        return [f"No row has more than one GPU count, so there is no speedup or efficiency: "
                f"{self.name} scaling compares experiments that keep {self.keeps} across GPU "
                f"counts, and these change it with the GPU count (--type {self.other} "
                "compares them)."]

    def scale_label(self, attempts: Attempts, rows: np.ndarray) -> str:
        devices = column_of(attempts, "exp.device_type")
        return scale_label({as_text(devices.values[code])
                            for code in np.unique(devices.codes[rows]).tolist()})
