"""Report tables as data: regular, weak scaling, strong scaling and pivot.

A cell holds one experiment (its ok attempts; `--latest`: its newest attempt only), never
two: rows are keyed by the identity parameters that vary (keys.py), the column axis being
the GPU count in scaling reports and a parameter of the user's choice in a pivot.

The numbers follow DLBS, minus its truncation and capping: throughput is the statistics
engine's (effective batch x 1000 / mean batch time); speedup and efficiency: scaling.py.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dlbs.errors import ResultsError
from dlbs.report import evaluation
from dlbs.report import keys as keys_module
from dlbs.report.identity import JsonKey, KeyRules, key_rules, value_of
from dlbs.report.keys import EXP_ID, display_order, field_name, title
from dlbs.report.metrics import (
    EFFICIENCY,
    SPEEDUP,
    THROUGHPUT,
    TIME,
    Metric,
    combine,
    metric,
    resolve,
)
from dlbs.report.scaling import add_scaling, count, positive, scale_label, scale_of
from dlbs.report.select import Experiment, Filter, as_text, resolve_key, select
from dlbs.results.sources import Record
from dlbs.results.stats import WARNINGS_KEY

REPORT_TYPES = ("regular", "weak", "strong", "pivot", *evaluation.TYPES)
SCALING = ("weak", "strong")
# The column axis of scaling reports: GPUs, or replicas (nodes) on CPU.
SCALE = "scale"
# Always row keys of each type (when --by does not say otherwise), even when constant.
LEAD_KEYS: dict[str, tuple[str, ...]] = {
    "regular": ("exp.model", "exp.replica_batch", "exp.effective_batch"),
    "weak": ("exp.model", "exp.replica_batch"),
    "strong": ("exp.model", "exp.effective_batch"),
    "pivot": (),
    **evaluation.LEAD_KEYS,
}
DEFAULT_METRICS: dict[str, tuple[str, ...]] = {
    "regular": (TIME, THROUGHPUT),
    "weak": (TIME, THROUGHPUT, SPEEDUP, EFFICIENCY),
    "strong": (TIME, THROUGHPUT, SPEEDUP, EFFICIENCY),
    **evaluation.DEFAULT_METRICS,
}
# Constant keys worth a mention above the tables besides the usual ones and a user's own.
_SHOWN_CONSTANTS = (*keys_module.LEADING, *keys_module.SIZES)


@dataclass
class Options:
    """What `dlbs report` was asked for."""

    kind: str = "regular"
    by: Sequence[str] | None = None
    filters: Sequence[Filter] = ()
    columns: Sequence[str] | None = None
    latest: bool = False
    # pivot only
    rows: Sequence[str] | None = None
    cols: str | None = None
    value: str | None = None


@dataclass
class Cell:
    """One experiment at one place of the report."""

    row: tuple[Any, ...]          # hashable row-key values (grouping)
    shown: tuple[Any, ...]        # the same values as read (display)
    column: Any                   # GPU count, pivot column value, or None
    experiment: Experiment
    attempts: list[Record]
    values: dict[str, Any] = field(default_factory=dict)
    # Largest batch-time std / mean of its attempts, percent; None without results.time_std.
    spread_pct: float | None = None

    @property
    def samples(self) -> int:
        """How many attempts the cell's values combine."""
        return len(self.attempts)


@dataclass
class Report:
    """A report: its keys, metrics and cells, and what was left out."""

    kind: str
    row_keys: list[str] = field(default_factory=list)
    column_key: str | None = None
    metrics: list[Metric] = field(default_factory=list)
    cells: list[Cell] = field(default_factory=list)
    constants: list[tuple[str, Any]] = field(default_factory=list)
    not_counted: Counter[str] = field(default_factory=Counter)
    incomplete: int = 0
    # Latency and accuracy reports: attempts of the other scenarios (evaluation.py).
    other_scenarios: int = 0
    latest_not_ok: int = 0
    duplicates: int = 0
    # Cells told apart only by exp.id (parameters that the report does not know).
    by_id: bool = False
    stats_warnings: list[str] = field(default_factory=list)
    scale_label: str = "GPUs"
    # Experiments whose newest attempt is not ok, with their reasons.
    failures: list[Experiment] = field(default_factory=list)
    # rows(), computed once for a given number of cells.
    _rows: tuple[int, list[Any]] | None = field(default=None, repr=False, compare=False)

    @property
    def counted(self) -> int:
        """Experiments in the tables."""
        return len(self.cells)

    @property
    def column_title(self) -> str:
        """What the column axis counts."""
        if self.column_key == SCALE:
            return self.scale_label
        return title(self.column_key) if self.column_key else ""

    @property
    def columns(self) -> list[Any]:
        """The column axis's values, in order."""
        return sorted({cell.column for cell in self.cells}, key=sort_key)

    def rows(self) -> list[tuple[tuple[Any, ...], dict[Any, Cell]]]:
        """Cells by row (row values as read, in display order), each mapping column -> cell."""
        if self._rows is not None and self._rows[0] == len(self.cells):
            return self._rows[1]
        grouped: dict[tuple[Any, ...], dict[Any, Cell]] = {}
        shown: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for cell in self.cells:
            grouped.setdefault(cell.row, {})[cell.column] = cell
            shown.setdefault(cell.row, cell.shown)
        ordered = sorted(grouped, key=lambda row: tuple(sort_key(v) for v in shown[row]))
        rows = [(shown[row], grouped[row]) for row in ordered]
        self._rows = (len(self.cells), rows)
        return rows

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

    def table(self) -> list[list[Any]]:
        """One list per cell, in `fields()` order and display order (2-decimal numbers)."""
        constants = [value for _, value in self._record_constants()]
        keys = [item.key for item in self.metrics]
        out = []
        for shown, cells in self.rows():
            for column in sorted(cells, key=sort_key):
                cell = cells[column]
                values = cell.values
                row = [*constants, *shown]
                if self.column_key is not None:
                    row.append(column)
                row.extend(_rounded(values.get(key)) for key in keys)
                row.append(_rounded(cell.spread_pct))
                row.append(cell.samples)
                out.append(row)
        return out

    def records(self) -> list[dict[str, Any]]:
        """One flat record per cell (CSV row, JSON object), numbers rounded to 2 decimals."""
        names = self.fields()
        return [dict(zip(names, row)) for row in self.table()]

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
        if any(cell.samples > 1 for cell in self.cells):
            notes.append("(n=K): the cell combines K ok attempts of one experiment (the mean "
                         "of their values; the maximum for peaks).")
        if self.by_id:
            notes.append("Some experiments differ in no parameter the report knows; the "
                         "exp.id column tells them apart.")
        spreads = [cell for cell in self.cells if cell.spread_pct is not None]
        if spreads:
            worst = max(spreads, key=lambda cell: cell.spread_pct or 0.0)
            where = ", ".join(as_text(v) for v in worst.shown[:1])
            if worst.column is not None and self.column_key == SCALE:
                label = self.scale_label
                if worst.column == 1 and label in ("GPUs", "replicas"):
                    label = label[:-1]
                where += f", {worst.column} {label}"
            notes.append(
                f"Batch-time spread (std / mean): at most {worst.spread_pct:.1f}% ({where}); "
                "differences smaller than the spread are not significant.")
        if self.stats_warnings:
            notes.append(f"{len(self.stats_warnings)} attempt(s) printed summary values that "
                         f"their per-batch times contradict; the first: "
                         f"{self.stats_warnings[0]}")
        if not self.cells:
            notes.append("No ok experiments to report.")
        return notes


def build_report(records: Sequence[Record], options: Options | str = "regular") -> Report:
    """Compute the report `options` ask for from attempt records (see the module)."""
    if isinstance(options, str):
        options = Options(kind=options)
    kind = options.kind
    if kind not in REPORT_TYPES:
        raise ResultsError(
            f"unknown report type {kind!r}; expected one of {', '.join(REPORT_TYPES)}")
    rules = key_rules()
    other_scenarios = 0
    if kind in evaluation.TYPES:
        records, other_scenarios = evaluation.in_scope(kind, records)
    selection = select(records, rules, options.filters, options.latest)
    report = Report(kind=kind, not_counted=selection.not_counted,
                    latest_not_ok=selection.latest_not_ok, duplicates=selection.duplicates,
                    failures=selection.failed, other_scenarios=other_scenarios)
    all_records = [record for _, attempts in selection.measured for record in attempts]
    report.metrics = _metrics(options, all_records)
    measured = []
    for experiment, attempts in selection.measured:
        if _usable(kind, attempts, report.metrics):
            measured.append((experiment, attempts))
        else:
            report.incomplete += 1
    if not measured:
        return report
    representatives = [attempts[-1] for _, attempts in measured]
    values_of = _values(representatives, [experiment for experiment, _ in measured])
    identity = keys_module.identity_keys(representatives, rules)
    varying = keys_module.varying_keys(representatives, identity)
    column_key = _column_key(options, representatives)
    report.column_key = column_key
    axis = [column_key] if column_key else []
    candidates = [key for key in varying if key != column_key]
    count = len(measured)
    if options.by is not None or kind == "pivot":
        wanted = list((options.rows if kind == "pivot" else options.by) or [])
        row_keys = [resolve_key(key, representatives) for key in wanted]
        _check_given_keys(count, axis, row_keys, wanted, candidates, rules, values_of)
    else:
        lead = [key for key in LEAD_KEYS[kind] if any(v is not None for v in values_of(key))]
        if kind == "regular" and "exp.num_gpus" in varying:
            lead.append("exp.num_gpus")   # the GPU count reads better than the batch it makes
        ordered = keys_module.preference(candidates, rules)
        row_keys = display_order(
            keys_module.choose(count, ordered, axis + lead, values_of)[len(axis):])
    if keys_module.partition(count, axis + row_keys, values_of)[1] < count:
        row_keys.append(EXP_ID)
        report.by_id = True
    report.row_keys = row_keys
    constant = [key for key in identity if key not in varying and key not in row_keys]
    report.constants = _constants(representatives[0], constant, rules)
    _fill_cells(report, measured, values_of)
    if kind in SCALING:
        add_scaling(kind, [cells for _, cells in report.rows()])
        report.scale_label = scale_label({as_text(r.experiment.get("exp.device_type"))
                                          for r in representatives})
    report.stats_warnings = [str(warnings[0]) for _, attempts in measured for a in attempts
                             if (warnings := a.experiment.get(WARNINGS_KEY))]
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
    described = ", ".join(f"{key} ({len(set(values_of(key)))} values)" for key in loose)
    raise ResultsError(
        f"rows keyed by {', '.join(wanted) or 'nothing'} would combine different experiments: "
        f"{described} also vary",
        hint="make them row keys too (--by, --rows, or --series for a chart), or keep one "
             "value with --filter KEY=VALUE")


def _metrics(options: Options, records: Sequence[Record]) -> list[Metric]:
    if options.kind == "pivot":
        if options.rows is None or not options.cols or not options.value:
            raise ResultsError("--type pivot needs --rows KEY, --cols KEY and --value "
                               "results.X", hint="e.g. --rows exp.model --cols "
                               "exp.replica_batch --value results.throughput")
        if options.columns:
            raise ResultsError("--type pivot shows one value: give it with --value, "
                               "not --columns")
        return resolve([options.value], records, scaling=False)
    if options.rows or options.cols or options.value:
        raise ResultsError("--rows, --cols and --value belong to --type pivot")
    if options.columns:
        return resolve(options.columns, records, scaling=options.kind in SCALING)
    return [metric(key) for key in DEFAULT_METRICS[options.kind]]


def _usable(kind: str, attempts: Sequence[Record], metrics: Sequence[Metric]) -> bool:
    latest = attempts[-1].experiment
    if kind != "pivot" and not latest.get("exp.model"):
        return False
    if kind in SCALING:
        return positive(latest.get(TIME)) and count(latest.get("exp.replica_batch"))
    return any(value_of(record, item.key) is not None
               for item in metrics for record in attempts)


def _column_key(options: Options, records: Sequence[Record]) -> str | None:
    if options.kind in SCALING:
        return SCALE
    if options.kind == "pivot":
        return resolve_key(str(options.cols), records)
    return None


def _values(records: Sequence[Record],
            experiments: Sequence[Experiment]) -> keys_module.ValuesOf:
    base = keys_module.value_lists(records)
    scales = [scale_of(record.experiment) for record in records]
    ids = [experiment.identity[1] if experiment.identity[0] == "id" else
           f"({index + 1})" for index, experiment in enumerate(experiments)]

    def values_of(key: str) -> list[Any]:
        if key == SCALE:
            return scales
        if key == EXP_ID:
            return ids
        return base(key)
    return values_of


def _fill_cells(report: Report, measured: Sequence[tuple[Experiment, list[Record]]],
                values_of: keys_module.ValuesOf) -> None:
    row_values = [values_of(key) for key in report.row_keys]
    columns = values_of(report.column_key) if report.column_key else None
    needed = {item.key: item for item in report.metrics}
    if report.kind in SCALING:
        needed.setdefault(TIME, metric(TIME))
        needed.setdefault(THROUGHPUT, metric(THROUGHPUT))
    needed.pop(SPEEDUP, None)
    needed.pop(EFFICIENCY, None)
    for index, (experiment, attempts) in enumerate(measured):
        latest = attempts[-1]
        row = tuple(values[index] for values in row_values)
        shown = row
        if any(isinstance(value, JsonKey) for value in row):   # lists and objects
            shown = tuple(value_of(latest, key) if isinstance(value, JsonKey) else value
                          for key, value in zip(report.row_keys, row))
        column = None
        if columns is not None:
            column = columns[index]
            if isinstance(column, JsonKey):
                column = as_text(value_of(latest, str(report.column_key)))
        cell = Cell(row=row, shown=shown, column=column, experiment=experiment,
                    attempts=attempts)
        cell.values = {key: combine(item, attempts) for key, item in needed.items()}
        if len(attempts) == 1:
            cell.spread_pct = _spread(latest)
        else:
            known = [spread for record in attempts if (spread := _spread(record)) is not None]
            cell.spread_pct = max(known) if known else None
        report.cells.append(cell)


def _spread(record: Record) -> float | None:
    std = record.experiment.get("results.time_std")
    mean = record.experiment.get(TIME)
    if not positive(mean) or not isinstance(std, int | float) or isinstance(std, bool) or \
            not math.isfinite(std):
        return None
    return 100.0 * std / mean


def _constants(record: Record, constant: Sequence[str],
               rules: KeyRules) -> list[tuple[str, Any]]:
    """The constant identity keys worth a mention above the tables.

    The usual ones, a user's own parameters, and declared ones set to something else than
    their default.
    """
    found = []
    for key in keys_module.display_order(constant):
        value = value_of(record, key)
        if value is None:
            continue
        if key in _SHOWN_CONSTANTS or key not in rules.declared or (
                key in rules.plain_defaults and rules.plain_defaults[key] != value):
            found.append((key, value))
    return found


def _column_field(report: Report) -> str:
    return "gpus" if report.column_key == SCALE else field_name(str(report.column_key))


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 2) if math.isfinite(value) else None
    return value


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
