"""Building a report: which runs its cells show, its row keys, column axis and values.

A cell holds one run of one experiment, never two experiments and never two runs combined:
rows are keyed by the identity parameters that vary (keys.py), the column axis being the
GPU count in scaling reports and a parameter of the user's choice in a pivot; each
experiment shows its newest ok run (select.py; `--runs each`: each ok run, with the row key
`run`). What differs between kinds, its kind decides (kinds/); the report as data:
document.py.

The numbers follow DLBS, minus its truncation and capping: throughput is the statistics
engine's (effective batch x 1000 / mean batch time); speedup and efficiency: scaling.py.

A report is built over columns (results/columns.py): its cells are arrays, one entry per
cell, so that 100,000 experiments take a fraction of a second; `cells` and `rows()` make
Python objects of them for pages, charts and tests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.report import baseline as baseline_module
from dlbs.report import keys as keys_module
from dlbs.report.document import RUN, Cells, Report
from dlbs.report.identity import (
    DEVICE_MODEL,
    KeyRules,
    column_of,
    key_rules,
    numbers_of,
)
from dlbs.report.keys import EXP_ID, display_order
from dlbs.report.kinds import NAMES, report_kind
from dlbs.report.kinds.base import SCENARIO, ReportKind, scenario_of
from dlbs.report.metrics import (
    SCALING_ONLY,
    SPEEDUP,
    TIME,
    CellValues,
    cell_values,
    metric,
)
from dlbs.report.notes import cell_notes
from dlbs.report.options import Options
from dlbs.report.ordering import ordered_by_codes, sort_key
from dlbs.report.scaling import SCALE, scales
from dlbs.report.select import Filter, Selection, as_text, matching, resolve_key, select
from dlbs.results.columns import Attempts, Record
from dlbs.results.stats import WARNINGS_KEY, is_contradiction

__all__ = ["REPORT_TYPES", "SCALE", "Cells", "Options", "Report", "build_report"]

REPORT_TYPES = NAMES
# Constant keys worth a mention above the tables besides the usual ones and a user's own.
_SHOWN_CONSTANTS = (*keys_module.LEADING, *keys_module.SIZES)
FRAMEWORK = "exp.framework"


def build_report(source: Attempts | Sequence[Record],
                 options: Options | str = "regular") -> Report:
    """Compute the report `options` ask for from attempts (columns, or records)."""
    if isinstance(options, str):
        options = Options(kind=options)
    kind = report_kind(options.kind)
    if options.runs not in RUNS:
        raise ResultsError(f"--runs {options.runs}: expected one of {', '.join(RUNS)}")
    attempts = source if isinstance(source, Attempts) else Attempts.of_records(source)
    rules = key_rules(attempts)
    kept, other_scenarios = kind.in_scope(attempts)
    if kept is not None:
        attempts = attempts.take(kept)
    selection = select(attempts, rules, options.filters, options.latest)
    attempts = selection.attempts
    each = options.runs == EACH
    report = Report(kind=kind.name, not_counted=selection.not_counted,
                    latest_not_ok=selection.latest_not_ok, duplicates=selection.duplicates,
                    other_scenarios=other_scenarios, selection=selection, each_run=each,
                    baseline=[f"{item.key}={item.pattern}" for item in options.baseline])
    report.metrics = kind.metrics(options, attempts, selection.members)
    selection = selection.shown_runs(each)
    usable = kind.usable(selection, report.metrics)
    _count_incomplete(report, kind, selection, usable)
    selection = selection.take(usable)
    count = len(selection.measured)
    if not count:
        return report
    shown = selection.members
    values_of, shown_values = _values(selection)
    identity = keys_module.identity_keys(attempts, shown, rules)
    varying = keys_module.varying_keys(values_of, identity, attempts)
    column_key = kind.column_key(options, attempts, shown)
    report.column_key = column_key
    axis = [column_key] if column_key else []
    candidates = [key for key in varying if key != column_key]
    wanted = kind.asked_row_keys(options)
    if wanted is not None:
        row_keys = [resolve_key(key, attempts, shown) for key in wanted]
        _check_given_keys(count, axis, row_keys, wanted, candidates, rules, values_of)
    else:
        lead = kind.leading(varying, values_of)
        ordered = keys_module.preference(candidates, rules)
        row_keys = display_order(
            keys_module.choose(count, ordered, axis + lead, values_of)[len(axis):])
    if FRAMEWORK in varying and FRAMEWORK not in row_keys and FRAMEWORK != column_key:
        # Rows of different frameworks always say which: a dummy row split from a PyTorch
        # one by dummy.sleep would read as a PyTorch number.
        row_keys = [*row_keys, FRAMEWORK] if wanted is not None else \
            display_order([*row_keys, FRAMEWORK])
    if each and keys_module.partition(count, axis + row_keys, values_of)[1] < count:
        row_keys.append(RUN)    # runs of one experiment: a row each
    if keys_module.partition(count, axis + row_keys, values_of)[1] < count:
        row_keys.append(EXP_ID)
        report.by_id = True
    report.row_keys = row_keys
    constant = [key for key in identity if key not in varying and key not in row_keys]
    report.constants = _constants(constant, rules, values_of, shown_values)
    report.table_cells = _cells(report, kind, selection, values_of, shown_values)
    if options.baseline:
        _baseline_speedups(report, options.baseline, rules, values_of)
    report.scale_label = kind.scale_label(attempts, shown)
    report.stats_warnings = _warnings(attempts, shown)
    report.more_notes = kind.notes(report.table_cells, values_of)
    return report


# --runs: each experiment's newest ok run (the default), or each of its ok runs.
LATEST, EACH = "latest", "each"
RUNS = (LATEST, EACH)


def _count_incomplete(report: Report, kind: ReportKind, selection: Selection,
                      usable: np.ndarray) -> None:
    """What the ok experiments left out lack, and those of scenarios another kind shows."""
    left_out = np.flatnonzero(~usable)
    if not len(left_out):
        return
    report.incomplete = Counter(kind.lacks(selection, report.metrics, left_out))
    others = [other for other in map(report_kind, NAMES)
              if other.name != kind.name and other.picks_scenarios]
    scenarios = column_of(selection.attempts, SCENARIO)
    for code in scenarios.codes[selection.members[left_out]].tolist():
        scenario = scenario_of(scenarios.values[code])
        if any(other.shows(scenario) for other in others):
            report.incomplete_scenarios[scenario] += 1


def _check_given_keys(count: int, axis: list[str], row_keys: list[str], wanted: list[str],
                      candidates: Sequence[str], rules: KeyRules,
                      values_of: keys_module.ValuesOf) -> None:
    """Refuse row keys (--by, --rows) that would leave different experiments in one cell."""
    others = [key for key in candidates if key not in row_keys]
    # Name the fewest keys that tell the experiments apart, not every one that follows.
    loose = keys_module.loose_keys(count, axis + row_keys, others, rules, values_of)
    if not loose:
        return
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


def _values(selection: Selection) -> tuple[keys_module.ValuesOf, keys_module.ValuesOf]:
    """Codes of a key per cell (its shown run), and the values the codes stand for.

    Besides the attempts' keys: SCALE (the GPU count), RUN (the run's number) and EXP_ID
    (the id, or "(k)" for the k-th experiment without one).
    """
    attempts, rows = selection.attempts, selection.members
    assert selection.run is not None
    run = selection.run.astype(np.intp)
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
        if key == RUN:
            return run
        if key == EXP_ID:
            return id_codes
        return base(key)

    def shown(key: str) -> Any:
        if key in (SCALE, RUN):
            return _Identity()
        if key == EXP_ID:
            return _Ids(ids, own_ids, first_own)
        return attempts.decoded(key) if key != DEVICE_MODEL else column_of(attempts, key).values
    return values_of, shown


class _Identity:
    """Values that are their own codes (GPU counts, run numbers)."""

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
    attempts, shown = selection.attempts, selection.members
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
    values = {key: cell_values(attempts, shown, item) for key, item in needed.items()}
    row = row_of_group[inverse.reshape(-1)]
    values.update(kind.derived(row, values_of(SCALE), values))
    assert selection.run is not None
    return Cells(selection, row, key_codes, key_tables, len(display), place, axis, values,
                 _spreads(attempts, shown), selection.run, selection.run_counts,
                 cell_notes(selection, report.metrics))


def _axis_value(value: Any) -> Any:
    return as_text(value) if isinstance(value, list | dict) else value


def _spreads(attempts: Attempts, shown: np.ndarray) -> np.ndarray:
    """Per cell, its run's batch-time std / mean, percent (NaN: none)."""
    mean = numbers_of(attempts, TIME)[shown]
    std = numbers_of(attempts, "results.time_std")[shown]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((mean > 0) & ~np.isnan(std), 100.0 * std / mean, np.nan)


def _warnings(attempts: Attempts, members: np.ndarray) -> list[str]:
    """The first warning of each shown attempt whose summary values were contradicted."""
    column = column_of(attempts, WARNINGS_KEY)
    codes = column.codes[members]
    if not codes.any():
        return []
    first = [_first_warning(value) for value in column.values]
    return [text for text in (first[code] for code in codes.tolist()) if text is not None]


def _first_warning(value: Any) -> str | None:
    """The first of the engine's contradictions (not the backend's warnings: stats.py)."""
    items = value if isinstance(value, list | tuple) else [value] if value else []
    return next((str(item) for item in items if is_contradiction(str(item))), None)


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


def _hashable(value: Any) -> Any:
    return as_text(value) if isinstance(value, list | dict) else (value.__class__, value)


