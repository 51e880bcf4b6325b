"""A comparison as text, markdown, CSV or JSON."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.report.compare import REGRESSIONS, VERDICTS, Comparison
from dlbs.report.keys import NUMERIC, field_name, title
from dlbs.report.numbers import significant_all
from dlbs.report.ordering import ordered_by_codes
from dlbs.report.render import Grid, aligned, key_text
from dlbs.report.select import as_text
from dlbs.results.output import records_to_csv, to_json

FORMATS = ("text", "markdown", "csv", "json")
COMPARE_FORMAT = "dlbs-comparison"
COMPARE_FORMAT_VERSION = 1
MISSING = "-"


def render_comparison(comparison: Comparison, fmt: str) -> str:
    """The comparison in format `fmt`, ending with a newline."""
    if fmt == "text":
        return _render_text(comparison)
    if fmt == "markdown":
        return _render_markdown(comparison)
    if fmt == "csv":
        return _render_csv(comparison)
    if fmt == "json":
        return to_json(comparison_document(comparison))
    raise ResultsError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


def summary_line(comparison: Comparison) -> str:
    """`dlbs compare: 2 slower, 1 now fails, 40 same; 3 only in BASE.`"""
    counts = comparison.counts()
    order = ("slower", "now fails", "faster", "now ok", "not significant", "untested",
             "no value", "both fail", "same")
    parts = [f"{counts[verdict]} {verdict}" for verdict in order if counts[verdict]]
    line = f"{comparison.size} matched: " + ", ".join(parts)
    if comparison.base_only:
        line += f"; {len(comparison.base_only)} only in BASE"
    if comparison.new_only:
        line += f"; {len(comparison.new_only)} only in NEW"
    return line + "."


#: What a comparison compares, for its header (a report's `time` is the mean batch time).
STATISTIC = "the median batch time (ms) of each experiment's newest attempt"


def notes(comparison: Comparison) -> list[str]:
    """The notes under a comparison: what it compares and how, what it did not match on."""
    return _notes(comparison)


def _notes(comparison: Comparison) -> list[str]:
    notes = [
        f"Value: median batch time (ms). A change within {comparison.threshold:.1%} is "
        f"'same'; beyond it, 'slower' or 'faster' only when the per-batch times differ by "
        f"the Mann-Whitney U test (two-sided, p < {comparison.alpha:g}), else 'not "
        "significant'; 'untested': too few per-batch times.",
    ]
    for key, base, new in comparison.differences:
        notes.append(f"Not matched on {key}: BASE has {key_text(base)}, NEW has "
                     f"{key_text(new)}.")
    return notes


def _grid(comparison: Comparison) -> Grid:
    keys = comparison.keys
    order = _ordered(comparison)
    columns = [_texts(codes, table, order) for codes, table in
               zip(comparison.shown_codes, comparison.shown_tables)]
    columns.append(_ms(comparison.base_value[order]))
    columns.append(_ms(comparison.new_value[order]))
    columns.append([MISSING if change != change else f"{change:+.1%}"
                    for change in comparison.change[order].tolist()])
    columns.append([MISSING if p_value != p_value else f"{p_value:.2g}"
                    for p_value in comparison.p_value[order].tolist()])
    shown = [verdict.upper() if verdict in REGRESSIONS else verdict for verdict in VERDICTS]
    columns.append([shown[code] for code in comparison.verdict[order].tolist()])
    headers = [title(key) for key in keys] + ["BASE (ms)", "NEW (ms)", "change", "p-value",
                                              "verdict"]
    numeric = [key in NUMERIC for key in keys] + [True, True, True, True, False]
    for item, base, new in comparison.extra:
        columns.append(significant_all(base[order]))
        columns.append(significant_all(new[order]))
        columns.append([MISSING if change != change else f"{change:+.1%}"
                        for change in _change(base, new)[order].tolist()])
        headers += [f"BASE {item.title}", f"NEW {item.title}", "change"]
        numeric += [True, True, True]
    return Grid("", headers, numeric, columns)


def _change(base: np.ndarray, new: np.ndarray) -> np.ndarray:
    """The relative change, NEW / BASE - 1, where both are numbers and BASE is not 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(base != 0, new / base - 1.0, np.nan)


def _texts(codes: np.ndarray, table: list[Any], order: np.ndarray) -> list[str]:
    """key_text of the values of `codes` (in `order`), each distinct value formatted once."""
    used = np.unique(codes)
    texts = {code: key_text(table[code]) for code in used.tolist()}
    return [texts[code] for code in codes[order].tolist()]


def _ordered(comparison: Comparison) -> np.ndarray:
    return ordered_by_codes(comparison.shown_codes, comparison.shown_tables, comparison.size)


def _one_side(comparison: Comparison) -> list[tuple[str, list[tuple[Any, ...]]]]:
    return [(name, rows) for name, rows in (("Only in BASE", comparison.base_only),
                                            ("Only in NEW", comparison.new_only)) if rows]


def _render_text(comparison: Comparison) -> str:
    out = [f"Comparison of {STATISTIC}: {summary_line(comparison)}", ""]
    out.extend(aligned(_grid(comparison)))
    for name, rows in _one_side(comparison):
        grid = Grid("", [title(key) for key in comparison.keys],
                    [key in NUMERIC for key in comparison.keys])
        grid.rows = [[key_text(value) for value in row] for row in rows]
        out.extend(["", f"{name} ({len(rows)}):", *aligned(grid)])
    out.append("")
    out.extend(_notes(comparison))
    return "\n".join(out) + "\n"


def _render_markdown(comparison: Comparison) -> str:
    def table(grid: Grid) -> list[str]:
        lines = ["| " + " | ".join(grid.headers) + " |",
                 "|" + "|".join("---:" if n else ":---" for n in grid.numeric) + "|"]
        lines.extend("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
                     for row in grid.rows)
        return lines

    out = [f"### Comparison of {STATISTIC}", "", summary_line(comparison), ""]
    out.extend(table(_grid(comparison)))
    for name, rows in _one_side(comparison):
        grid = Grid("", [title(key) for key in comparison.keys],
                    [key in NUMERIC for key in comparison.keys])
        grid.rows = [[key_text(value) for value in row] for row in rows]
        out.extend(["", f"**{name} ({len(rows)})**", "", *table(grid)])
    out.append("")
    out.extend(f"_{note}_  " for note in _notes(comparison))
    return "\n".join(out) + "\n"


def _records(comparison: Comparison) -> list[dict[str, Any]]:
    order = _ordered(comparison).tolist()
    base_ids, new_ids = comparison.ids()
    names = [field_name(key) for key in comparison.keys]
    values = {
        "base_ms": _optional(comparison.base_value), "new_ms": _optional(comparison.new_value),
        "change": _optional(comparison.change), "p_value": _optional(comparison.p_value),
        "verdict": [VERDICTS[code] for code in comparison.verdict.tolist()],
        "base_exp_id": base_ids, "new_exp_id": new_ids,
    }
    for item, base, new in comparison.extra:
        values[f"base_{item.field}"] = _optional(base)
        values[f"new_{item.field}"] = _optional(new)
        values[f"{item.field}_change"] = _optional(_change(base, new))
    records = []
    shown_values = comparison.shown
    for index in order:
        record: dict[str, Any] = {name: shown[index] for name, shown in
                                  zip(names, shown_values)}
        record.update((name, column[index]) for name, column in values.items())
        records.append(record)
    return records


def _optional(values: np.ndarray) -> list[float | None]:
    return [None if value != value else value for value in values.tolist()]


def _render_csv(comparison: Comparison) -> str:
    records = _records(comparison)
    columns = [field_name(k) for k in comparison.keys] + [
        "base_ms", "new_ms", "change", "p_value", "verdict", "base_exp_id", "new_exp_id"]
    for item, _, _ in comparison.extra:
        columns += [f"base_{item.field}", f"new_{item.field}", f"{item.field}_change"]
    return records_to_csv(columns, records)


def comparison_document(comparison: Comparison) -> dict[str, Any]:
    """The JSON document of a comparison (versioned)."""
    def side(rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
        return [{field_name(k): v for k, v in zip(comparison.keys, row)} for row in rows]

    return {
        "format": COMPARE_FORMAT,
        "version": COMPARE_FORMAT_VERSION,
        "value": "results.time_median",
        "threshold": comparison.threshold,
        "alpha": comparison.alpha,
        "keys": [field_name(k) for k in comparison.keys],
        "matches": _records(comparison),
        "base_only": side(comparison.base_only),
        "new_only": side(comparison.new_only),
        "counts": dict(sorted(comparison.counts().items())),
        "regressions": comparison.regression_count,
        "not_matched_on": [{"key": k, "base": as_text(a), "new": as_text(b)}
                           for k, a, b in comparison.differences],
        "notes": _notes(comparison),
    }


def _ms(values: np.ndarray) -> list[str]:
    """Times for people: significant digits, as reports write them (numbers.py)."""
    return significant_all(values)
