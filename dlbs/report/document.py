"""A report as data: its cells as arrays, its table of fields, its notes (tables.py builds it).

A cell holds one run of one experiment (select.py). Its values are kept as stored: the
records of `Report.records()` (CSV rows, JSON objects) carry them exactly (numbers.py), and
only renderers for people round. Notes that belong to one cell (a LoadGen run that is
invalid, a backend's warning, summary values its batches contradict, runs of its experiment
that disagree: notes.py) travel with the cell; notes about the whole report are footnotes.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlbs.report.keys import field_name, title
from dlbs.report.kinds import report_kind
from dlbs.report.kinds.base import ReportKind
from dlbs.report.metrics import CellValues, Metric, cell_values, metric
from dlbs.report.numbers import exact
from dlbs.report.scaling import SCALE
from dlbs.report.select import Experiment, Selection, as_text
from dlbs.results.columns import Record

# Record fields after the values: the shown run's spread, which run it is, how many ok runs
# its experiment has, and the cell's notes.
SPREAD_FIELD, RUN_FIELD, RUNS_FIELD, NOTES_FIELD = "time_std_pct", "run", "runs", "notes"
# The row key of `--runs each`: the run's number among its experiment's ok runs.
RUN = "run"


@dataclass
class Cells:
    """The cells of a report as arrays, one entry per cell, in the order of experiments.

    Cell c shows the run `selection.members[c]` of the experiment `selection.measured[c]`.
    `row[c]` is the number of its row in display order; `key_codes[k][r]` the code of row
    r's value of row key k, which `key_tables[k]` decodes; `place[c]` the number of its
    column (`axis[place[c]]` its value on the column axis, in order; no axis: all 0).
    `run[c]` is the run's number among its experiment's ok runs (1: the oldest), `runs[c]`
    how many there are; `notes[c]` the cell's notes (cells without any are left out).
    """

    selection: Selection
    row: np.ndarray
    key_codes: list[np.ndarray]
    key_tables: list[Any]
    rows: int
    place: np.ndarray
    axis: list[Any] | None
    values: dict[str, CellValues]
    spread: np.ndarray
    run: np.ndarray
    runs: np.ndarray
    notes: dict[int, list[str]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """How many cells."""
        return len(self.row)

    @functools.cached_property
    def shown(self) -> list[tuple[Any, ...]]:
        """The row-key values of each row, in display order."""
        if not self.key_codes:
            return [()] * self.rows
        return list(zip(*self.key_values()))

    def key_values(self) -> list[list[Any]]:
        """Per row key, its value in each row (display order)."""
        return [[table[code] for code in codes.tolist()]
                for codes, table in zip(self.key_codes, self.key_tables)]

    @functools.cached_property
    def column(self) -> list[Any] | None:
        """Each cell's value on the column axis (None without one)."""
        if self.axis is None:
            return None
        return [self.axis[place] for place in self.place.tolist()]


@dataclass
class TablePart:
    """One field of a report's table, over its `size` lines (cells in display order).

    Either the `same` value on every line, values of a `table` picked by `codes`, cell
    values (`values`, as stored) of the cells `codes`, or one value per line (`each`).
    """

    size: int
    same: Any = None
    table: Sequence[Any] | None = None
    values: CellValues | None = None
    codes: np.ndarray | None = None
    each: list[Any] | None = None

    def values_list(self) -> list[Any]:
        """The field's value on every line, as stored (numbers.exact)."""
        if self.each is not None:
            return self.each
        if self.values is not None:
            assert self.codes is not None
            return exact_values(self.values, self.codes)
        if self.table is not None:
            assert self.codes is not None
            table = self.table
            return [table[code] for code in self.codes.tolist()]
        return [self.same] * self.size


def exact_values(values: CellValues, order: np.ndarray) -> list[Any]:
    """The cells' values (in `order`) as stored (numbers.exact)."""
    return list(map(exact, values.stored(order)))


class Cell:
    """One run of one experiment at one place of the report (made from the report's arrays)."""

    def __init__(self, cells: Cells, index: int, metric_keys: Sequence[str]) -> None:
        self._cells = cells
        self.index = index
        self.row = cells.row[index]
        self.shown = cells.shown[self.row]
        self.column = None if cells.column is None else cells.column[index]
        self.values = {key: cells.values[key].get(index) for key in metric_keys}
        spread = float(cells.spread[index])
        self.spread_pct = None if math.isnan(spread) else spread
        self.run = int(cells.run[index])
        self.runs = int(cells.runs[index])
        self.notes = cells.notes.get(index, [])

    @functools.cached_property
    def experiment(self) -> Experiment:
        """The experiment, every attempt of it."""
        selection = self._cells.selection
        return selection.experiment(int(selection.measured[self.index]))

    @functools.cached_property
    def attempts(self) -> list[Record]:
        """The attempt the cell's values are of (a list of one)."""
        return self._cells.selection.member_records(self.index)


@dataclass
class Report:
    """A report: its keys, metrics and cells, and what was left out."""

    kind: str
    row_keys: list[str] = field(default_factory=list)
    column_key: str | None = None
    metrics: list[Metric] = field(default_factory=list)
    constants: list[tuple[str, Any]] = field(default_factory=list)
    not_counted: Counter[str] = field(default_factory=Counter)
    # Ok experiments left out: what they lack ("a model", "a value of ...") -> how many.
    incomplete: Counter[str] = field(default_factory=Counter)
    # ... and of those, the scenarios that another kind shows -> how many.
    incomplete_scenarios: Counter[str] = field(default_factory=Counter)
    # Attempts of the scenarios that the kind does not show (ReportKind.in_scope).
    other_scenarios: int = 0
    latest_not_ok: int = 0
    duplicates: int = 0
    # Cells told apart only by exp.id (parameters that the report does not know).
    by_id: bool = False
    # --runs each: a cell per ok run (the row key `run`); else the newest ok run.
    each_run: bool = False
    # --baseline, as asked for (KEY=GLOB each): the speedup column compares with it, and
    # the row keys that rows and their baselines were found to share (baseline.py).
    baseline: list[str] = field(default_factory=list)
    baseline_compared: list[str] = field(default_factory=list)
    stats_warnings: list[str] = field(default_factory=list)
    scale_label: str = "GPUs"
    # Notes about the whole report, besides those footnotes() makes (notes.py).
    more_notes: list[str] = field(default_factory=list)
    table_cells: Cells | None = field(default=None, repr=False)
    selection: Selection | None = field(default=None, repr=False)

    @property
    def report_kind(self) -> ReportKind:
        """What the report's kind decides (kinds/)."""
        return report_kind(self.kind)

    @property
    def heading(self) -> str:
        """The report's first line: its title (a pivot's names its value and columns)."""
        return self.report_kind.heading(self.metrics, self.column_title)

    @property
    def counted(self) -> int:
        """Cells in the tables (experiments; with --runs each, runs)."""
        return 0 if self.table_cells is None else self.table_cells.size

    @functools.cached_property
    def cells(self) -> list[Cell]:
        """Every cell, in the order of experiments."""
        if self.table_cells is None:
            return []
        keys = [*self.table_cells.values]
        return [Cell(self.table_cells, index, keys) for index in range(self.counted)]

    @functools.cached_property
    def failures(self) -> list[Experiment]:
        """Experiments whose newest attempt is not ok, with their reasons."""
        if self.selection is None:
            return []
        return [self.selection.experiment(int(number)) for number in self.selection.failed]

    @property
    def column_title(self) -> str:
        """What the column axis counts."""
        if self.column_key == SCALE:
            return self.scale_label
        return title(self.column_key) if self.column_key else ""

    @property
    def columns(self) -> list[Any]:
        """The column axis's values, in order."""
        if self.table_cells is None or self.table_cells.axis is None:
            return [None] if self.counted else []
        return self.table_cells.axis

    def rows(self) -> list[tuple[tuple[Any, ...], dict[Any, Cell]]]:
        """Cells by row (row values as read, in display order), each mapping column -> cell."""
        if self.table_cells is None:
            return []
        grouped: list[dict[Any, Cell]] = [{} for _ in range(self.table_cells.rows)]
        for cell in self.cells:
            grouped[cell.row][cell.column] = cell
        return list(zip(self.table_cells.shown, grouped))

    def fields(self) -> list[str]:
        """Names of a record's fields: constant and row keys, the column axis, the values."""
        return [field_name(key) for key, _ in self._record_constants()] + self._own_fields()

    def _own_fields(self) -> list[str]:
        names = [field_name(key) for key in self.row_keys]
        if self.column_key is not None:
            names.append("gpus" if self.column_key == SCALE else field_name(self.column_key))
        run = [] if RUN in self.row_keys else [RUN_FIELD]
        return [*names, *(item.field for item in self.metrics), SPREAD_FIELD, *run,
                RUNS_FIELD, NOTES_FIELD]

    def _record_constants(self) -> list[tuple[str, Any]]:
        # A constant named like another field (CPU scaling: gpus 0 and the gpus column) yields.
        own = self._own_fields()
        return [(key, value) for key, value in self.constants if field_name(key) not in own]

    def displayed(self) -> np.ndarray:
        """The cells in display order: by row, then column; one per (row, column)."""
        cells = self.table_cells
        if cells is None:
            return np.zeros(0, dtype=np.intp)
        spot = cells.row.astype(np.int64) * (int(cells.place.max(initial=0)) + 1) + cells.place
        order = np.argsort(spot, kind="stable")
        ordered = spot[order]
        # A later cell at the same place wins, as in `rows()`.
        last = np.ones(len(order), dtype=bool)
        last[:-1] = ordered[1:] != ordered[:-1]
        return order[last]

    def table_parts(self) -> list[TablePart]:
        """The table of `fields()`, one part per field, cells in display order."""
        cells = self.table_cells
        order = self.displayed()
        size = len(order)
        parts = [TablePart(size, same=value) for _, value in self._record_constants()]
        if cells is not None:
            rows = cells.row[order]
            for codes, table in zip(cells.key_codes, cells.key_tables):
                parts.append(TablePart(size, table=table, codes=codes[rows]))
            if self.column_key is not None and cells.axis is not None:
                parts.append(TablePart(size, table=cells.axis, codes=cells.place[order]))
            for item in self.metrics:
                parts.append(TablePart(size, values=cells.values[item.key], codes=order))
            parts.append(TablePart(size, values=CellValues(cells.spread), codes=order))
            if RUN not in self.row_keys:
                parts.append(TablePart(size, each=cells.run[order].tolist()))
            parts.append(TablePart(size, each=cells.runs[order].tolist()))
            parts.append(TablePart(size, each=[cells.notes.get(cell, [])
                                               for cell in order.tolist()]))
        return parts

    def table_columns(self) -> list[list[Any]]:
        """The table of `fields()` as columns (display order; values as stored)."""
        return [part.values_list() for part in self.table_parts()]

    def table(self) -> list[list[Any]]:
        """One list per cell, in `fields()` order and display order (values as stored)."""
        return [list(row) for row in zip(*self.table_columns())]

    def records(self) -> list[dict[str, Any]]:
        """One flat record per cell (CSV row, JSON object), values as stored."""
        names = self.fields()
        return [dict(zip(names, row)) for row in zip(*self.table_columns())]

    def cell_values(self, key: str) -> CellValues:
        """Any value (a results key) of every cell: that of the run it shows."""
        cells = self.table_cells
        if cells is None:
            return CellValues(np.zeros(0))
        if key not in cells.values:
            selection = cells.selection
            cells.values[key] = cell_values(selection.attempts, selection.members, metric(key))
        return cells.values[key]

    @property
    def older_runs(self) -> int:
        """Experiments shown by their newest ok run that have older ones."""
        cells = self.table_cells
        if cells is None or self.each_run:
            return 0
        return int(np.count_nonzero(cells.runs > 1))

    def footnotes(self) -> list[str]:
        """What the tables leave out and how their cells were made."""
        notes = []
        if self.not_counted:
            parts = ", ".join(f"{count} {status}" for status, count in
                              sorted(self.not_counted.items()))
            notes.append(f"Not counted (status not ok): {parts}.")
        if self.other_scenarios:
            notes.append(f"Not shown: {self.other_scenarios} attempt(s) of other scenarios "
                         f"(exp.scenario; see --type regular, latency, accuracy).")
        for lack, count in sorted(self.incomplete.items()):
            notes.append(f"Not counted: {count} ok experiment(s) without {lack}"
                         + _scenarios_hint(self.incomplete_scenarios) + ".")
        if self.latest_not_ok:
            notes.append(f"{self.latest_not_ok} experiment(s) shown with an earlier ok run: "
                         "their newest attempt is not ok (--latest shows only the newest).")
        if self.older_runs:
            notes.append(f"{self.older_runs} experiment(s) have older ok runs than the one "
                         "shown (the newest; field runs); --runs each shows every run, never "
                         "averaged.")
        if self.duplicates:
            notes.append(f"{self.duplicates} attempt(s) read twice (a log and a database, or "
                         "two copies) counted once.")
        if self.by_id:
            notes.append("Some experiments differ in no parameter the report knows; the "
                         "exp.id column tells them apart.")
        if self.baseline:
            shared = ", ".join(map(title, self.baseline_compared))
            notes.append(f"speedup: the median batch time of the row's baseline over the "
                         f"row's. Baseline rows: {', '.join(self.baseline)}; " + (
                             f"a row's baseline has the row's {shared}." if shared else
                             "no other row key is compared."))
        cells = self.table_cells
        if cells is not None and not np.isnan(cells.spread).all():
            worst = int(np.nanargmax(cells.spread))
            notes.append(
                f"Batch-time spread (std / mean): at most {cells.spread[worst]:.1f}% "
                f"({where(self, worst)}); differences smaller than the spread are not "
                "significant.")
        if self.stats_warnings:
            notes.append(f"{len(self.stats_warnings)} attempt(s) printed summary values that "
                         f"their per-batch times contradict; the first: "
                         f"{self.stats_warnings[0]}")
        notes.extend(self.more_notes)
        if not self.counted:
            notes.append("No ok experiments to report.")
        return notes


def _scenarios_hint(scenarios: Counter[str]) -> str:
    """`; of them, 1 of exp.scenario accuracy (--type accuracy)`, naming kinds that show them."""
    from dlbs.report.kinds import NAMES

    parts = []
    for scenario, count in sorted(scenarios.items()):
        kinds = [name for name in NAMES if report_kind(name).picks_scenarios
                 and report_kind(name).shows(scenario)]
        shown_by = f" (--type {', '.join(kinds)})" if kinds else ""
        parts.append(f"{count} of exp.scenario {scenario}{shown_by}")
    return f"; of them, {', '.join(parts)}" if parts else ""


def where(report: Report, cell: int, keys: int | None = 1) -> str:
    """Where a cell is, for a note: its row keys' values, and its column.

    `keys` row keys (the first; None: all of them).
    """
    cells = report.table_cells
    assert cells is not None
    row = cells.row[cell]
    text = ", ".join(as_text(table[codes[row]]) for codes, table in
                     zip(cells.key_codes[:keys], cells.key_tables[:keys]))
    column = None if cells.column is None else cells.column[cell]
    if column is not None and report.column_key == SCALE:
        label = report.scale_label
        if column == 1 and label in ("GPUs", "replicas"):
            label = label[:-1]
        text += f", {column} {label}"
    elif column is not None:
        text += f", {report.column_title} {as_text(column)}"
    return text
