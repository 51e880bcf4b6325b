"""`--type efficiency`: a regular report's rows, and what each costs (docs/efficiency.md).

Columns: throughput, energy per sample (J), samples per joule, average power (W), achieved
TFLOPS, MFU and the allocator's peak GPU memory, all computed when the attempt was
summarised (dlbs/results/energy.py, efficiency.py). A sweep of batch size or dtype reads as
the most energy-efficient setting at a glance; its chart is throughput against power, one
point per row (`dlbs plot --preset efficiency` draws the same).

A row without energy or MFU shows dashes, and a footnote says why, grouped by reason: the
reason the attempt stored (`results.energy_unavailable`, `results.mfu_unavailable`,
`results.flops_unavailable`), so that a CPU without readable RAPL or a GPU the peak table
does not know reads as such, not as something left undone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlbs.report.identity import column_of
from dlbs.report.keys import ValuesOf
from dlbs.report.kinds.regular import Regular
from dlbs.report.metrics import EFFICIENCY_COLUMNS, metric
from dlbs.report.select import as_text

ENERGY_COLUMNS = ("results.energy_per_sample_j", "results.samples_per_joule",
                  "results.power_avg_w")
#: Columns that are missing together -> the keys that say why (the first one a row has),
#: and what to say when a row has none of them.
WHY_MISSING: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    (ENERGY_COLUMNS, ("results.energy_unavailable",),
     "no energy reading was stored (measured with monitor.energy false and "
     "monitor.frequency 0, or by an older dlbs)"),
    (("results.achieved_tflops",), ("results.flops_unavailable",),
     "the backend printed no FLOPs per sample"),
    (("results.mfu",), ("results.mfu_unavailable", "results.flops_unavailable"),
     "the backend printed no FLOPs per sample"),
)
#: Rows a footnote names before it says "and N more".
NAMED_ROWS = 3


@dataclass(frozen=True)
class Efficiency(Regular):
    """The efficiency report (see the module): a regular report with its own values."""

    def notes(self, cells: Any, values_of: ValuesOf) -> list[str]:
        """Why rows have no energy, no achieved TFLOPS or no MFU, one note per reason."""
        notes = []
        for columns, _, _ in WHY_MISSING:
            shown = [key for key in columns if cells is not None and key in cells.values]
            if not shown:
                continue
            titles = ", ".join(metric(key).title for key in shown)
            for reason, members in missing_reasons(cells, columns):
                notes.append(f"{titles}: none in {_rows(cells, members)}: "
                             f"{reason.rstrip('.')}.")
        return notes


def missing_reasons(cells: Any, columns: Sequence[str]) -> list[tuple[str, list[int]]]:
    """(reason, cells) for the cells that have none of `columns` (one of WHY_MISSING's)."""
    present = [key for key in columns if key in cells.values]
    if not present or not cells.size:
        return []
    lacking = np.ones(cells.size, dtype=bool)
    for key in present:
        values = cells.values[key]
        lacking &= np.isnan(values.numbers)
        for cell in values.others:
            lacking[cell] = False
    found = np.flatnonzero(lacking)
    if not len(found):
        return []
    _, reason_keys, fallback = next(entry for entry in WHY_MISSING if entry[0] == tuple(columns))
    selection = cells.selection
    rows = selection.members[found]
    reasons: list[str | None] = [None] * len(found)
    for key in reason_keys:
        column = column_of(selection.attempts, key)
        for position, code in enumerate(column.codes[rows].tolist()):
            text = column.values[code]
            if reasons[position] is None and isinstance(text, str) and text.strip():
                reasons[position] = " ".join(text.split())
    grouped: dict[str, list[int]] = {}
    for cell, reason in zip(found.tolist(), reasons):
        grouped.setdefault(reason or fallback, []).append(cell)
    return sorted(grouped.items(), key=lambda item: (-len(item[1]), item[0]))


def _rows(cells: Any, members: list[int]) -> str:
    """`2 row(s) (resnet50, 16; resnet50, 32)`: how many, and the first few by their keys."""
    labels = []
    for cell in members[:NAMED_ROWS]:
        parts = [as_text(value) for value in cells.shown[cells.row[cell]]]
        if cells.column is not None:
            parts.append(as_text(cells.column[cell]))
        if parts:
            labels.append(", ".join(parts))
    more = f"; and {len(members) - NAMED_ROWS} more" if len(members) > NAMED_ROWS else ""
    named = f" ({'; '.join(labels)}{more})" if labels else ""
    return f"{len(members)} row(s){named}"


KIND = Efficiency("efficiency", "Efficiency report",
                  lead_keys=("exp.model", "exp.seq_len", "exp.replica_batch",
                             "exp.effective_batch"),
                  default_metrics=EFFICIENCY_COLUMNS, chart="efficiency")
