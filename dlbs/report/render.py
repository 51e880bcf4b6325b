"""Reports as text, markdown, CSV or JSON (the HTML page: html.py).

Text and markdown are for people: identity keys with one value everywhere are listed once
above the tables, and scaling and pivot reports spread their column axis (GPU counts, the
pivot's key) over the columns. CSV and JSON are for programs: one record per cell with every
key, whatever the values. Text is laid out here rather than by rich, column by column, each
distinct key value formatted once: a report of 100,000 experiments must render in well under
a second.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.report import evaluation
from dlbs.report.keys import NUMERIC, title
from dlbs.report.metrics import CellValues
from dlbs.report.select import as_text
from dlbs.report.tables import SCALE, Cells, Report, TablePart, rounded_value
from dlbs.results.output import csv_cell, csv_field, to_json

FORMATS = ("text", "markdown", "csv", "json")
REPORT_FORMAT = "dlbs-report"
REPORT_FORMAT_VERSION = 2

MISSING = "-"
# What makes the csv module quote a field (its default dialect, QUOTE_MINIMAL).
_CSV_SPECIAL = (",", '"', "\r", "\n")
_TWO_DECIMALS = "%.2f".__mod__
# Below this, "%.2f" without trailing zeros is the repr of the rounded float.
_PLAIN_LIMIT = 1e12

TITLES = {"regular": "Regular report", "weak": "Weak scaling (same replica batch)",
          "strong": "Strong scaling (same effective batch)", "pivot": "Pivot table",
          **evaluation.TITLES}


def render(report: Report, fmt: str) -> str:
    """The report in format `fmt` (one of FORMATS), ending with a newline."""
    renderers: dict[str, Callable[[Report], str]] = {
        "text": render_text, "markdown": render_markdown, "csv": render_csv,
        "json": render_json,
    }
    if fmt not in renderers:
        raise ResultsError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return renderers[fmt](report)


# -- shared layout for people --------------------------------------------------------------

class Grid:
    """A titled table of strings: headers, rows (or columns), and which columns are numbers."""

    def __init__(self, title_: str, headers: list[str], numeric: list[bool],
                 columns: list[list[str]] | None = None) -> None:
        self.title = title_
        self.headers = headers
        self.numeric = numeric
        self._columns = columns
        self._rows: list[Any] | None = None if columns is not None else []

    @property
    def rows(self) -> list[Any]:
        """The rows, each a sequence of strings."""
        if self._rows is None:
            self._rows = list(zip(*self._columns)) if self._columns else []
        return self._rows

    @rows.setter
    def rows(self, rows: list[Any]) -> None:
        self._rows, self._columns = rows, None

    def columns(self) -> list[list[str]] | list[tuple[str, ...]]:
        """The columns, each a sequence of strings (without the header)."""
        if self._columns is not None:
            return self._columns
        return list(zip(*self.rows)) if self.rows else [[] for _ in self.headers]


def number(value: Any, samples: int = 1) -> str:
    """A cell's text: two decimals for numbers, `(n=K)` when it combines K attempts."""
    if value is None:
        return MISSING
    text = f"{value:.2f}" if isinstance(value, float) else as_text(value)
    return f"{text} (n={samples})" if samples > 1 else text


def numbers(values: CellValues, order: np.ndarray, samples: np.ndarray | None) -> list[str]:
    """`number()` of the cells `order` (samples: attempts per cell, None for 1)."""
    texts = [MISSING if text == "nan" else text
             for text in map(_TWO_DECIMALS, values.numbers[order].tolist())]
    if values.others:
        for position, cell in enumerate(order.tolist()):
            if cell in values.others:
                texts[position] = number(values.others[cell])
    if samples is not None:
        counts = samples[order]
        for position in np.flatnonzero(counts > 1).tolist():
            if texts[position] != MISSING:
                texts[position] += f" (n={counts[position]})"
    return texts


def key_text(value: Any) -> str:
    """A row key's text."""
    text = as_text(value)
    return text if text != "" else MISSING


def header_lines(report: Report) -> list[str]:
    """The report's title and the constant keys."""
    lines = [TITLES[report.kind]]
    if report.kind == "pivot" and report.metrics:
        lines[0] += f": {report.metrics[0].title} by {report.column_title}"
    if report.constants:
        lines.append("All rows: " + ", ".join(f"{title(key)} {key_text(value)}"
                                              for key, value in report.constants) + ".")
    return lines


def layout(report: Report) -> list[Grid]:
    """The tables of a report: one, or one per metric spread over the column axis."""
    cells = report.table_cells
    key_headers = [title(key) for key in report.row_keys]
    key_numeric = [key in NUMERIC for key in report.row_keys]
    order = report.displayed()
    if cells is None:
        if report.column_key is None:
            return [Grid("", key_headers + [item.title for item in report.metrics],
                         key_numeric + [True] * len(report.metrics))]
        return [Grid(f"{item.title}, by {_axis_title(report)}", key_headers, key_numeric)
                for item in report.metrics]
    row_texts = [_key_texts(codes, table) for codes, table in
                 zip(cells.key_codes, cells.key_tables)]
    if report.column_key is None:
        rows = cells.row[order].tolist()
        columns = [[texts[row] for row in rows] for texts in row_texts]
        columns.extend(numbers(cells.values[item.key], order, _samples(cells, item.key))
                       for item in report.metrics)
        return [Grid("", key_headers + [item.title for item in report.metrics],
                     key_numeric + [True] * len(report.metrics), columns)]
    axis = report.columns
    rows = cells.row[order]
    places = cells.place[order]
    grids = []
    for item in report.metrics:
        table = np.full((len(axis), cells.rows), MISSING, dtype=object)
        table[places, rows] = numbers(cells.values[item.key], order, _samples(cells, item.key))
        grids.append(Grid(f"{item.title}, by {_axis_title(report)}",
                          key_headers + [key_text(column) for column in axis],
                          key_numeric + [True] * len(axis), [*row_texts, *table.tolist()]))
    return grids


def _key_texts(codes: np.ndarray, table: Any) -> list[str]:
    """key_text of each code's value, each distinct value formatted once."""
    texts = {code: key_text(table[code]) for code in np.unique(codes).tolist()}
    return list(map(texts.__getitem__, codes.tolist()))


def _axis_title(report: Report) -> str:
    if report.column_key == SCALE:
        return f"number of {report.scale_label}"
    return report.column_title


def _samples(cells: Cells, key: str) -> np.ndarray | None:
    # Speedup and efficiency compare cells; they are not averages of attempts.
    return None if key in ("speedup", "efficiency") else cells.samples


# -- text ------------------------------------------------------------------------------

def render_text(report: Report) -> str:
    """Plain ASCII: columns separated by two blanks, a rule of dashes under the header."""
    out = header_lines(report)
    for grid in layout(report):
        out.append("")
        if grid.title:
            out.append(grid.title)
        out.extend(aligned(grid))
    notes = report.footnotes()
    if notes:
        out.append("")
        out.extend(notes)
    return "\n".join(out) + "\n"


def aligned(grid: Grid) -> list[str]:
    """A grid as lines of aligned columns, a rule of dashes under the header."""
    widths = [max(len(header), max(map(len, column), default=0))
              for header, column in zip(grid.headers, grid.columns())]
    # One format string for every line: the padding happens in C, not cell by cell.
    template = "  ".join(f"{{:{'>' if numeric else '<'}{width}}}"
                         for width, numeric in zip(widths, grid.numeric))
    lines = [template.format(*grid.headers).rstrip(), "  ".join("-" * w for w in widths)]
    lines.extend(template.format(*row).rstrip() for row in grid.rows)
    return lines


# -- markdown --------------------------------------------------------------------------

def _markdown_escape(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(report: Report) -> str:
    """GitHub-flavoured markdown tables, numbers right-aligned."""
    lines = header_lines(report)
    out = [f"### {lines[0]}", ""]
    out.extend(line + "\n" for line in lines[1:])
    for grid in layout(report):
        if grid.title:
            out.extend([f"**{grid.title}**", ""])
        out.append("| " + " | ".join(_markdown_escape(h) for h in grid.headers) + " |")
        out.append("|" + "|".join("---:" if numeric else ":---" for numeric in grid.numeric)
                   + "|")
        for row in grid.rows:
            out.append("| " + " | ".join(_markdown_escape(cell) for cell in row) + " |")
        out.append("")
    for note in report.footnotes():
        out.append(f"_{_markdown_escape(note)}_  ")
    return "\n".join(out).rstrip() + "\n"


# -- for programs ----------------------------------------------------------------------

def render_csv(report: Report) -> str:
    """One line per cell; footnotes are not part of CSV (the CLI prints them on stderr).

    As the csv module writes it (QUOTE_MINIMAL): text as is, numbers as Python writes them
    (after rounding to 2 decimals), lists and objects as JSON, None as an empty field.
    """
    columns = [_csv_part(part) for part in report.table_parts()]
    lines = [",".join(_csv_quoted(name) for name in report.fields())]
    lines.extend(map(",".join, zip(*columns)))
    return "\n".join(lines) + "\n"


def _csv_part(part: TablePart) -> list[str]:
    """One field's CSV text on every line, each distinct value formatted once."""
    if part.values is not None:
        assert part.codes is not None
        return _csv_numbers(part.values, part.codes)
    if part.table is not None:
        assert part.codes is not None
        texts = [_csv_text(value) for value in part.table]
        return list(map(texts.__getitem__, part.codes.tolist()))
    return [_csv_text(part.same)] * part.size


def _csv_text(value: Any) -> str:
    if isinstance(value, str):
        return _csv_quoted(csv_field(value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _csv_quoted(str(value))
    return _csv_quoted(csv_cell(value))


def _csv_numbers(values: CellValues, order: np.ndarray) -> list[str]:
    """Cell values rounded to 2 decimals, as `str(round(x, 2))` writes them."""
    numbers = values.numbers[order]
    # "%.2f" is round(x, 2) correctly rounded; without its trailing zeros it is the float's
    # repr, as long as 2 decimals are within a double's precision (checked by a test).
    texts = [text.rstrip("0") for text in map(_TWO_DECIMALS, numbers.tolist())]
    texts = [text + "0" if text[-1] == "." else text for text in texts]
    for position in np.flatnonzero(~(np.abs(numbers) < _PLAIN_LIMIT)).tolist():
        number = float(numbers[position])
        texts[position] = str(round(number, 2)) if math.isfinite(number) else ""
    if values.others:
        for position, cell in enumerate(order.tolist()):
            if cell in values.others:
                texts[position] = _csv_text(rounded_value(values.others[cell]))
    return texts


def _csv_quoted(text: str) -> str:
    if any(special in text for special in _CSV_SPECIAL):
        return '"' + text.replace('"', '""') + '"'
    return text


def report_document(report: Report) -> dict[str, Any]:
    """The JSON document of a report (versioned like every file dlbs writes)."""
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_FORMAT_VERSION,
        "type": report.kind,
        "row_keys": list(report.row_keys),
        "column_key": report.column_key,
        "scale": report.scale_label if report.column_key == SCALE else None,
        "constants": dict(report.constants),
        "baseline": list(report.baseline),
        "rows": report.records(),
        "counted": report.counted,
        "not_counted": dict(sorted(report.not_counted.items())),
        "incomplete": report.incomplete,
        "latest_not_ok": report.latest_not_ok,
        "duplicates": report.duplicates,
        "notes": report.footnotes(),
    }


def render_json(report: Report) -> str:
    """The report document as indented JSON."""
    return to_json(report_document(report))
