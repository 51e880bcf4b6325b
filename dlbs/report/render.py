"""Reports as text, markdown, CSV or JSON (the HTML page: html.py).

Text and markdown are for people: identity keys with one value everywhere are listed once
above the tables, and scaling and pivot reports spread their column axis (GPU counts, the
pivot's key) over the columns. CSV and JSON are for programs: one record per cell with every
key, whatever the values. Text is laid out here rather than by rich: a report of 100,000
experiments must render in well under a second.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from dlbs.errors import ResultsError
from dlbs.report import evaluation
from dlbs.report.keys import NUMERIC, title
from dlbs.report.select import as_text
from dlbs.report.tables import SCALE, Cell, Report
from dlbs.results.output import csv_cell, to_json

FORMATS = ("text", "markdown", "csv", "json")
REPORT_FORMAT = "dlbs-report"
REPORT_FORMAT_VERSION = 2

MISSING = "-"

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
    """A titled table of strings: headers, rows, and which columns are numbers."""

    def __init__(self, title_: str, headers: list[str], numeric: list[bool]) -> None:
        self.title = title_
        self.headers = headers
        self.numeric = numeric
        self.rows: list[list[str]] = []


def number(value: Any, samples: int = 1) -> str:
    """A cell's text: two decimals for numbers, `(n=K)` when it combines K attempts."""
    if value is None:
        return MISSING
    text = f"{value:.2f}" if isinstance(value, float) else as_text(value)
    return f"{text} (n={samples})" if samples > 1 else text


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
    rows = report.rows()
    key_headers = [title(key) for key in report.row_keys]
    key_numeric = [key in NUMERIC for key in report.row_keys]

    def key_cells(shown: tuple[Any, ...]) -> list[str]:
        return [key_text(value) for value in shown]

    if report.column_key is None:
        grid = Grid("", key_headers + [item.title for item in report.metrics],
                    key_numeric + [True] * len(report.metrics))
        for shown, cells in rows:
            for cell in cells.values():
                grid.rows.append(key_cells(shown) + [
                    number(cell.values.get(item.key), _samples(cell, item.key))
                    for item in report.metrics])
        return [grid]
    columns = report.columns
    grids = []
    for item in report.metrics:
        heading = f"{item.title}, by {_axis_title(report)}"
        grid = Grid(heading, key_headers + [key_text(column) for column in columns],
                    key_numeric + [True] * len(columns))
        for shown, cells in rows:
            grid.rows.append(key_cells(shown) + [
                number(cells[column].values.get(item.key), _samples(cells[column], item.key))
                if column in cells else MISSING for column in columns])
        grids.append(grid)
    return grids


def _axis_title(report: Report) -> str:
    if report.column_key == SCALE:
        return f"number of {report.scale_label}"
    return report.column_title


def _samples(cell: Cell, key: str) -> int:
    # Speedup and efficiency compare cells; they are not averages of attempts.
    return 1 if key in ("speedup", "efficiency") else cell.samples


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
    widths = [max(map(len, column)) for column in zip(grid.headers, *grid.rows)]
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

def record_columns(report: Report) -> list[str]:
    """Fields of a CSV report: constant and row keys, the column axis, the values."""
    return report.fields()


def render_csv(report: Report) -> str:
    """One line per cell; footnotes are not part of CSV (the CLI prints them on stderr)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(report.fields())
    writer.writerows([value if isinstance(value, str | int | float) and
                      not isinstance(value, bool) else csv_cell(value) for value in row]
                     for row in report.table())
    return buffer.getvalue()


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
