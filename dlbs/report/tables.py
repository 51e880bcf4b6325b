"""Report tables as data: regular, weak scaling, strong scaling and pivot.

A cell holds one experiment (its ok attempts; `--latest`: its newest attempt only), never
two: rows are keyed by the identity parameters that vary (keys.py), the column axis being
the GPU count in scaling reports and a parameter of the user's choice in a pivot.

The numbers follow DLBS, minus its truncation and capping: throughput is the statistics
engine's (effective batch x 1000 / mean batch time); speedup and efficiency: scaling.py.

A report is built over columns (results/columns.py): its cells are arrays, one entry per
experiment, so that 100,000 experiments take a fraction of a second; `cells` and `rows()`
make Python objects of them for pages, charts and tests.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.report import baseline as baseline_module
from dlbs.report import keys as keys_module
from dlbs.report.identity import (
    DEVICE_MODEL,
    KeyRules,
    column_of,
    key_rules,
    numbers_of,
)
from dlbs.report.keys import EXP_ID, display_order, field_name, title
from dlbs.report.kinds import NAMES, report_kind
from dlbs.report.kinds.base import ReportKind
from dlbs.report.metrics import (
    SCALING_ONLY,
    SPEEDUP,
    TIME,
    CellValues,
    Metric,
    combine_cells,
    metric,
)
from dlbs.report.options import Options
from dlbs.report.scaling import SCALE, scales
from dlbs.report.select import (
    Experiment,
    Filter,
    Selection,
    as_text,
    matching,
    resolve_key,
    select,
)
from dlbs.results.columns import Attempts, Record
from dlbs.results.stats import WARNINGS_KEY

__all__ = ["REPORT_TYPES", "SCALE", "Cells", "Options", "Report", "build_report"]

REPORT_TYPES = NAMES
# Constant keys worth a mention above the tables besides the usual ones and a user's own.
_SHOWN_CONSTANTS = (*keys_module.LEADING, *keys_module.SIZES)


@dataclass
class Cells:
    """The cells of a report as arrays, one entry per cell, in the order of experiments.

    Cell c is the c-th measured experiment of `selection`. `row[c]` is the number of its row
    in display order; `key_codes[k][r]` the code of row r's value of row key k, which
    `key_tables[k]` decodes; `place[c]` the number of its column (`axis[place[c]]` its
    value on the column axis, in order; no axis: all 0).
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
    samples: np.ndarray

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

    Either the `same` value on every line, values of a `table` picked by `codes`, or cell
    values (`values`, numbers rounded to 2 decimals) of the cells `codes`.
    """

    size: int
    same: Any = None
    table: Sequence[Any] | None = None
    values: CellValues | None = None
    codes: np.ndarray | None = None

    def values_list(self) -> list[Any]:
        """The field's value on every line."""
        if self.values is not None:
            assert self.codes is not None
            return rounded(self.values, self.codes)
        if self.table is not None:
            assert self.codes is not None
            table = self.table
            return [table[code] for code in self.codes.tolist()]
        return [self.same] * self.size


class Cell:
    """One experiment at one place of the report (made from the report's arrays)."""

    def __init__(self, cells: Cells, index: int, metric_keys: Sequence[str]) -> None:
        self._cells = cells
        self.index = index
        self.row = cells.row[index]
        self.shown = cells.shown[self.row]
        self.column = None if cells.column is None else cells.column[index]
        self.values = {key: cells.values[key].get(index) for key in metric_keys}
        spread = float(cells.spread[index])
        self.spread_pct = None if math.isnan(spread) else spread
        self.samples = int(cells.samples[index])

    @functools.cached_property
    def experiment(self) -> Experiment:
        """The experiment, every attempt of it."""
        selection = self._cells.selection
        return selection.experiment(int(selection.measured[self.index]))

    @functools.cached_property
    def attempts(self) -> list[Record]:
        """The attempts the cell's values combine, oldest first."""
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
    incomplete: int = 0
    # Attempts of the scenarios that the kind does not show (ReportKind.in_scope).
    other_scenarios: int = 0
    latest_not_ok: int = 0
    duplicates: int = 0
    # Cells told apart only by exp.id (parameters that the report does not know).
    by_id: bool = False
    # --baseline, as asked for (KEY=GLOB each): the speedup column compares with it, and
    # the row keys that rows and their baselines were found to share (baseline.py).
    baseline: list[str] = field(default_factory=list)
    baseline_compared: list[str] = field(default_factory=list)
    stats_warnings: list[str] = field(default_factory=list)
    scale_label: str = "GPUs"
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
        """Experiments in the tables."""
        return 0 if self.table_cells is None else len(self.table_cells.samples)

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
            names.append(_column_field(self))
        return [*names, *(item.field for item in self.metrics), "time_std_pct", "samples"]

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
        parts = [TablePart(len(order), same=value) for _, value in self._record_constants()]
        if cells is not None:
            rows = cells.row[order]
            for codes, table in zip(cells.key_codes, cells.key_tables):
                parts.append(TablePart(len(order), table=table, codes=codes[rows]))
            if self.column_key is not None and cells.axis is not None:
                parts.append(TablePart(len(order), table=cells.axis, codes=cells.place[order]))
            for item in self.metrics:
                parts.append(TablePart(len(order), values=cells.values[item.key], codes=order))
            parts.append(TablePart(len(order), values=CellValues(cells.spread), codes=order))
            parts.append(TablePart(len(order), table=list(range(int(cells.samples.max()) + 1)),
                                   codes=cells.samples[order]))
        return parts

    def table_columns(self) -> list[list[Any]]:
        """The table of `fields()` as columns (display order; 2-decimal numbers)."""
        return [part.values_list() for part in self.table_parts()]

    def table(self) -> list[list[Any]]:
        """One list per cell, in `fields()` order and display order (2-decimal numbers)."""
        return [list(row) for row in zip(*self.table_columns())]

    def records(self) -> list[dict[str, Any]]:
        """One flat record per cell (CSV row, JSON object), numbers rounded to 2 decimals."""
        names = self.fields()
        return [dict(zip(names, row)) for row in zip(*self.table_columns())]

    def cell_values(self, key: str) -> CellValues:
        """Any value (a results key) of every cell, combined over its attempts as metrics are."""
        cells = self.table_cells
        if cells is None:
            return CellValues(np.zeros(0))
        if key not in cells.values:
            selection = cells.selection
            cells.values[key] = combine_cells(selection.attempts, selection.members,
                                              selection.member_starts, metric(key))
        return cells.values[key]

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
        if self.incomplete:
            notes.append(f"Not counted: {self.incomplete} ok experiment(s) without a model, "
                         "a batch size or a value to show.")
        if self.latest_not_ok:
            notes.append(f"{self.latest_not_ok} experiment(s) shown with earlier ok attempts: "
                         "their newest attempt is not ok (--latest shows only the newest).")
        if self.duplicates:
            notes.append(f"{self.duplicates} attempt(s) read twice (a log and a database, or "
                         "two copies) counted once.")
        cells = self.table_cells
        if cells is not None and (cells.samples > 1).any():
            notes.append("(n=K): the cell combines K ok attempts of one experiment (the mean "
                         "of their values; the maximum for peaks).")
        if self.by_id:
            notes.append("Some experiments differ in no parameter the report knows; the "
                         "exp.id column tells them apart.")
        if self.baseline:
            shared = ", ".join(map(title, self.baseline_compared))
            notes.append(f"speedup: the median batch time of the row's baseline over the "
                         f"row's. Baseline rows: {', '.join(self.baseline)}; " + (
                             f"a row's baseline has the row's {shared}." if shared else
                             "no other row key is compared."))
        if cells is not None and not np.isnan(cells.spread).all():
            worst = int(np.nanargmax(cells.spread))
            row = cells.row[worst]
            where = ", ".join(as_text(table[codes[row]]) for codes, table in
                              zip(cells.key_codes[:1], cells.key_tables[:1]))
            column = None if cells.column is None else cells.column[worst]
            if column is not None and self.column_key == SCALE:
                label = self.scale_label
                if column == 1 and label in ("GPUs", "replicas"):
                    label = label[:-1]
                where += f", {column} {label}"
            notes.append(
                f"Batch-time spread (std / mean): at most {cells.spread[worst]:.1f}% ({where}); "
                "differences smaller than the spread are not significant.")
        if self.stats_warnings:
            notes.append(f"{len(self.stats_warnings)} attempt(s) printed summary values that "
                         f"their per-batch times contradict; the first: "
                         f"{self.stats_warnings[0]}")
        if not self.counted:
            notes.append("No ok experiments to report.")
        return notes


def build_report(source: Attempts | Sequence[Record],
                 options: Options | str = "regular") -> Report:
    """Compute the report `options` ask for from attempts (columns, or records)."""
    if isinstance(options, str):
        options = Options(kind=options)
    kind = report_kind(options.kind)
    attempts = source if isinstance(source, Attempts) else Attempts.of_records(source)
    rules = key_rules()
    kept, other_scenarios = kind.in_scope(attempts)
    if kept is not None:
        attempts = attempts.take(kept)
    selection = select(attempts, rules, options.filters, options.latest)
    attempts = selection.attempts
    report = Report(kind=kind.name, not_counted=selection.not_counted,
                    latest_not_ok=selection.latest_not_ok, duplicates=selection.duplicates,
                    other_scenarios=other_scenarios, selection=selection,
                    baseline=[f"{item.key}={item.pattern}" for item in options.baseline])
    report.metrics = kind.metrics(options, attempts, selection.members)
    usable = kind.usable(selection, report.metrics)
    report.incomplete = int(np.count_nonzero(~usable))
    selection = selection.take(usable)
    count = len(selection.measured)
    if not count:
        return report
    representatives = selection.representatives
    values_of, shown_values = _values(attempts, representatives)
    identity = keys_module.identity_keys(attempts, representatives, rules)
    varying = keys_module.varying_keys(values_of, identity, attempts)
    column_key = kind.column_key(options, attempts, representatives)
    report.column_key = column_key
    axis = [column_key] if column_key else []
    candidates = [key for key in varying if key != column_key]
    wanted = kind.asked_row_keys(options)
    if wanted is not None:
        row_keys = [resolve_key(key, attempts, representatives) for key in wanted]
        _check_given_keys(count, axis, row_keys, wanted, candidates, rules, values_of)
    else:
        lead = kind.leading(varying, values_of)
        ordered = keys_module.preference(candidates, rules)
        row_keys = display_order(
            keys_module.choose(count, ordered, axis + lead, values_of)[len(axis):])
    if keys_module.partition(count, axis + row_keys, values_of)[1] < count:
        row_keys.append(EXP_ID)
        report.by_id = True
    report.row_keys = row_keys
    constant = [key for key in identity if key not in varying and key not in row_keys]
    report.constants = _constants(constant, rules, values_of, shown_values)
    report.table_cells = _cells(report, kind, selection, values_of, shown_values)
    if options.baseline:
        _baseline_speedups(report, options.baseline, rules, values_of)
    report.scale_label = kind.scale_label(attempts, representatives)
    report.stats_warnings = _warnings(attempts, selection.members)
    return report


def _check_given_keys(count: int, axis: list[str], row_keys: list[str], wanted: list[str],
                      candidates: Sequence[str], rules: KeyRules,
                      values_of: keys_module.ValuesOf) -> None:
    """Refuse row keys (--by, --rows) that would leave different experiments in one cell."""
    others = [key for key in candidates if key not in row_keys]
    if not keys_module.undetermined(count, axis + row_keys, others, values_of):
        return
    # Name the fewest keys that tell the experiments apart, not every one that follows.
    fixed = axis + row_keys
    loose = keys_module.choose(count, keys_module.preference(others, rules), fixed,
                               values_of)[len(fixed):]
    described = ", ".join(f"{key} ({keys_module.distinct(values_of(key))} values)"
                          for key in loose)
    raise ResultsError(
        f"rows keyed by {', '.join(wanted) or 'nothing'} would combine different experiments: "
        f"{described} also vary",
        hint="make them row keys too (--by, --rows, or --series for a chart), or keep one "
             "value with --filter KEY=VALUE")


def _baseline_speedups(report: Report, filters: Sequence[Filter], rules: KeyRules,
                       values_of: keys_module.ValuesOf) -> None:
    """The speedup of each row over its baseline row (baseline.py); one row per cell here."""
    cells = report.table_cells
    assert cells is not None
    selection = cells.selection
    attempts = selection.attempts
    cell_of_row = np.empty(cells.rows, dtype=np.intp)
    cell_of_row[cells.row] = np.arange(len(cells.row))
    rows = baseline_module.Rows(report.row_keys, cells.key_codes, cells.key_tables)
    is_baseline = matching(attempts, filters, selection.representatives[cell_of_row])
    compared = baseline_module.compared_keys(
        len(cells.row), report.row_keys, [resolve_key(item.key, attempts) for item in filters],
        rules, values_of)
    chosen = baseline_module.baselines(rows, is_baseline, compared, ", ".join(report.baseline))
    report.baseline_compared = baseline_module.shared_keys(rows, chosen, compared)
    times = report.cell_values(baseline_module.SPEEDUP_TIME).numbers[cell_of_row]
    cells.values[SPEEDUP] = CellValues(baseline_module.speedups(times, chosen)[cells.row])


def _values(attempts: Attempts, rows: np.ndarray) -> tuple[keys_module.ValuesOf,
                                                            keys_module.ValuesOf]:
    """Codes of a key per experiment, and the values the codes stand for (index: code).

    Besides the attempts' keys: SCALE (the GPU count) and EXP_ID (the id, or "(k)" for the
    k-th experiment without one).
    """
    base = keys_module.value_lists(attempts, rows)
    scale = scales(attempts, rows)
    ids = column_of(attempts, "exp.id")
    id_codes = ids.codes[rows].astype(np.int64)
    empty = ids.find("")
    missing = (id_codes == 0) if empty is None else (id_codes == 0) | (id_codes == empty)
    first_own = int(ids.codes.max(initial=0)) + 1
    id_codes[missing] = first_own + np.arange(int(missing.sum()))
    own_ids = [f"({index + 1})" for index in np.flatnonzero(missing).tolist()]

    def values_of(key: str) -> np.ndarray:
        if key == SCALE:
            return scale
        if key == EXP_ID:
            return id_codes
        return base(key)

    def shown(key: str) -> Any:
        if key == SCALE:
            return _Identity()
        if key == EXP_ID:
            return _Ids(ids, own_ids, first_own)
        return attempts.decoded(key) if key != DEVICE_MODEL else column_of(attempts, key).values
    return values_of, shown


class _Identity:
    """Values that are their own codes (GPU counts)."""

    def __getitem__(self, code: int) -> int:
        return int(code)


class _Ids:
    """Values of EXP_ID codes: the id as text, or "(k)"."""

    def __init__(self, ids: Any, own: list[str], first_own: int) -> None:
        self._ids, self._own, self._first_own = ids, own, first_own

    def __getitem__(self, code: int) -> str:
        if code >= self._first_own:
            return self._own[code - self._first_own]
        return str(self._ids.values[code])


def _cells(report: Report, kind: ReportKind, selection: Selection,
           values_of: keys_module.ValuesOf, shown_values: keys_module.ValuesOf) -> Cells:
    """The cells of the report's experiments (see Cells)."""
    attempts, members, starts = selection.attempts, selection.members, selection.member_starts
    count = len(selection.measured)
    groups, _ = keys_module.partition(count, report.row_keys, values_of)
    distinct, first, inverse = np.unique(groups, return_index=True, return_inverse=True)
    # Rows in display order: by their values (see sort_key), then as first read.
    first_seen = np.argsort(first, kind="stable")
    display = first_seen[ordered_by_codes(
        [values_of(key)[first[first_seen]] for key in report.row_keys],
        [shown_values(key) for key in report.row_keys], len(first))]
    row_of_group = np.empty(len(distinct), dtype=np.intp)
    row_of_group[display] = np.arange(len(distinct))
    firsts = first[display]
    key_codes = [values_of(key)[firsts] for key in report.row_keys]
    key_tables = [shown_values(key) for key in report.row_keys]
    place = np.zeros(count, dtype=np.intp)
    axis: list[Any] | None = None
    if report.column_key is not None:
        codes = values_of(report.column_key)
        decoded = shown_values(report.column_key)
        used = np.unique(codes)
        # Lists and objects are columns by their JSON text; equal texts are one column.
        texts = [_axis_value(decoded[code]) for code in used.tolist()]
        distinct: dict[Any, Any] = {}
        for value in texts:
            distinct.setdefault(_hashable(value), value)
        axis = sorted(distinct.values(), key=sort_key)
        rank = {_hashable(value): index for index, value in enumerate(axis)}
        place = np.array([rank[_hashable(value)] for value in texts],
                         dtype=np.intp)[np.searchsorted(used, codes)]
    needed = {item.key: item for item in report.metrics}
    for key in kind.needed():
        needed.setdefault(key, metric(key))
    for key in SCALING_ONLY:
        needed.pop(key, None)
    values = {key: combine_cells(attempts, members, starts, item)
              for key, item in needed.items()}
    row = row_of_group[inverse.reshape(-1)]
    values.update(kind.derived(row, values_of(SCALE), values))
    return Cells(selection, row, key_codes, key_tables, len(display), place, axis, values,
                 _spreads(attempts, members, starts), np.diff(starts))


def _axis_value(value: Any) -> Any:
    return as_text(value) if isinstance(value, list | dict) else value


def _spreads(attempts: Attempts, members: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per cell, the largest batch-time std / mean of its attempts, percent (NaN: none)."""
    mean = numbers_of(attempts, TIME)[members]
    std = numbers_of(attempts, "results.time_std")[members]
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where((mean > 0) & ~np.isnan(std), 100.0 * std / mean, np.nan)
    return np.fmax.reduceat(spread, starts[:-1]) if len(starts) > 1 else np.zeros(0)


def _warnings(attempts: Attempts, members: np.ndarray) -> list[str]:
    """The first warning of each measured attempt whose summary values were contradicted."""
    column = column_of(attempts, WARNINGS_KEY)
    codes = column.codes[members]
    if not codes.any():
        return []
    first = [_first_warning(value) for value in column.values]
    return [text for text in (first[code] for code in codes.tolist()) if text is not None]


def _first_warning(value: Any) -> str | None:
    if not value:
        return None
    return str(value[0]) if isinstance(value, list | tuple | str) else str(value)


def _constants(constant: Sequence[str], rules: KeyRules, values_of: keys_module.ValuesOf,
               shown_values: keys_module.ValuesOf) -> list[tuple[str, Any]]:
    """The constant identity keys worth a mention above the tables.

    The usual ones, a user's own parameters, and declared ones set to something else than
    their default.
    """
    found = []
    for key in keys_module.display_order(constant):
        code = int(values_of(key)[0])
        value = None if code == 0 else shown_values(key)[code]
        if value is None:
            continue
        if key in _SHOWN_CONSTANTS or key not in rules.declared or (
                key in rules.plain_defaults and rules.plain_defaults[key] != value):
            found.append((key, value))
    return found


def _column_field(report: Report) -> str:
    return "gpus" if report.column_key == SCALE else field_name(str(report.column_key))


def rounded(values: CellValues, order: np.ndarray) -> list[Any]:
    """The cells' values (in `order`) with numbers rounded to 2 decimals."""
    numbers = values.numbers[order].tolist()
    found: list[Any] = [None if number != number else round(number, 2) for number in numbers]
    if values.others:
        for position, cell in enumerate(order.tolist()):
            if cell in values.others:
                found[position] = rounded_value(values.others[cell])
    return found


def rounded_value(value: Any) -> Any:
    """A float rounded to 2 decimals (None when not finite); anything else as it is."""
    if isinstance(value, float):
        return round(value, 2) if math.isfinite(value) else None
    return value


def _hashable(value: Any) -> Any:
    return as_text(value) if isinstance(value, list | dict) else (value.__class__, value)


def ordered_by_codes(codes: Sequence[np.ndarray], tables: Sequence[Any],
                     size: int) -> np.ndarray:
    """Positions 0..size-1 by their values `tables[k][codes[k]]` (sort_key), ties in order."""
    sort_columns = [np.arange(size)]
    for key_codes, table in zip(reversed(codes), reversed(tables)):
        used = np.unique(key_codes)
        ranks = _ranks([table[code] for code in used.tolist()])
        sort_columns.append(ranks[np.searchsorted(used, key_codes)])
    return np.lexsort(sort_columns)


def _ranks(values: list[Any]) -> np.ndarray:
    """Each value's place by sort_key; values with equal sort keys share one."""
    keys = [sort_key(value) for value in values]
    ranks = np.empty(len(values), dtype=np.intp)
    rank, previous = -1, None
    for index in sorted(range(len(values)), key=keys.__getitem__):
        if rank < 0 or keys[index] != previous:
            rank, previous = rank + 1, keys[index]
        ranks[index] = rank
    return ranks


_DIGITS = re.compile(r"(\d+)")


@functools.lru_cache(maxsize=1 << 16)
def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that puts resnet18 before resnet50 before resnet101."""
    return tuple(int(part) if part.isdigit() else part.lower()
                 for part in _DIGITS.split(text))


def sort_key(value: Any) -> tuple[Any, ...]:
    """Sort key of a row value: None first, then numbers, then text in natural order."""
    # None first, then numbers, then text (naturally): mixed types never compare directly.
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (2, natural_key(str(value).lower()))
    if isinstance(value, int | float):
        return (1, value)
    return (2, natural_key(as_text(value)))
