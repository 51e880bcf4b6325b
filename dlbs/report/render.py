"""Reports as text (a rich table rendered to plain text), markdown, CSV or JSON.

Text and markdown are for people: key columns that hold a single value are folded into one
line above the tables, and scaling reports pivot GPU counts into columns. CSV and JSON are
for programs: one record per cell with every key, whatever the values.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from dlbs.errors import ResultsError
from dlbs.report.tables import ALWAYS_SHOWN, KEY_TITLES, Cell, Report
from dlbs.results.output import csv_cell, to_json

FORMATS = ("text", "markdown", "csv", "json")
REPORT_FORMAT = "dlbs-report"
REPORT_FORMAT_VERSION = 1

MISSING = "-"

TITLES = {"regular": "Regular report", "weak": "Weak scaling (same replica batch)",
          "strong": "Strong scaling (same effective batch)"}


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

class _Grid:
    """A titled table of strings: headers, rows, and which columns are numbers."""

    def __init__(self, title: str, headers: list[str], numeric: list[bool]) -> None:
        self.title = title
        self.headers = headers
        self.numeric = numeric
        self.rows: list[list[str]] = []


def _number(value: float | None, samples: int = 1) -> str:
    if value is None:
        return MISSING
    text = f"{value:.2f}"
    return f"{text} (n={samples})" if samples > 1 else text


def _layout(report: Report) -> tuple[list[str], list[_Grid]]:
    """Lines above the tables (the folded constant keys) and the tables themselves."""
    rows = report.rows()
    shown = [
        index for index, name in enumerate(report.row_keys)
        if name in ALWAYS_SHOWN or len({row[index] for row, _ in rows}) > 1
    ]
    constants = [
        f"{KEY_TITLES[name]} {rows[0][0][index] or MISSING}"
        for index, name in enumerate(report.row_keys) if index not in shown and rows
    ]
    header_lines = [TITLES[report.kind]]
    if constants:
        header_lines.append("All rows: " + ", ".join(constants) + ".")
    key_headers = [KEY_TITLES[report.row_keys[index]] for index in shown]

    def key_cells(row: tuple[Any, ...]) -> list[str]:
        return [str(row[index]) if row[index] != "" else MISSING for index in shown]

    key_numeric = [report.row_keys[index] in ("gpus", "replica_batch", "effective_batch")
                   for index in shown]
    if report.kind == "regular":
        grid = _Grid("", key_headers + ["batch time (ms)", "throughput (inst/s)"],
                     key_numeric + [True, True])
        for row, cells in rows:
            for cell in cells.values():
                grid.rows.append(key_cells(row) + [_number(cell.time_ms, cell.samples),
                                                   _number(cell.throughput, cell.samples)])
        return header_lines, [grid]

    scales = report.scales
    metrics: list[tuple[str, Callable[[Cell], str]]] = [
        ("Batch time (ms)", lambda cell: _number(cell.time_ms, cell.samples)),
        ("Throughput (instances/s)", lambda cell: _number(cell.throughput, cell.samples)),
        ("Speedup", lambda cell: _number(cell.speedup)),
        ("Efficiency (%)", lambda cell: _number(cell.efficiency)),
    ]
    grids = []
    for title, value in metrics:
        grid = _Grid(f"{title}, by number of {report.scale_label}",
                     key_headers + [str(scale) for scale in scales],
                     key_numeric + [True] * len(scales))
        for row, cells in rows:
            grid.rows.append(key_cells(row) + [
                value(cells[scale]) if scale in cells else MISSING for scale in scales
            ])
        grids.append(grid)
    return header_lines, grids


# -- text ------------------------------------------------------------------------------

# rich's SIMPLE_HEAD in ASCII: only a rule under the header, so the text survives any pager,
# e-mail or CI log.
_ASCII_HEAD_RULE = "    \n    \n -- \n    \n    \n    \n    \n    \n"

def render_text(report: Report) -> str:
    """Plain text: rich tables rendered without colour or terminal codes."""
    from rich.box import Box
    from rich.console import Console
    from rich.table import Table

    header_lines, grids = _layout(report)
    buffer = io.StringIO()
    console = Console(file=buffer, width=1000, color_system=None, force_terminal=False,
                      no_color=True, highlight=False, emoji=False, markup=False)
    for line in header_lines:
        console.print(line, soft_wrap=True)
    for grid in grids:
        console.print()
        if grid.title:
            console.print(grid.title, soft_wrap=True)
        table = Table(box=Box(_ASCII_HEAD_RULE, ascii=True), show_edge=False, pad_edge=False,
                      highlight=False)
        for header, numeric in zip(grid.headers, grid.numeric):
            table.add_column(header, justify="right" if numeric else "left", no_wrap=True)
        for row in grid.rows:
            table.add_row(*row)
        console.print(table)
    notes = report.footnotes()
    if notes:
        console.print()
        for note in notes:
            console.print(note, soft_wrap=True)
    lines = [line.rstrip() for line in buffer.getvalue().splitlines()]
    return "\n".join(lines).strip("\n") + "\n"


# -- markdown --------------------------------------------------------------------------

def _markdown_escape(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(report: Report) -> str:
    """GitHub-flavoured markdown tables, numbers right-aligned."""
    header_lines, grids = _layout(report)
    out = [f"### {header_lines[0]}", ""]
    out.extend(line + "\n" for line in header_lines[1:])
    for grid in grids:
        if grid.title:
            out.extend([f"**{grid.title}**", ""])
        out.append("| " + " | ".join(_markdown_escape(h) for h in grid.headers) + " |")
        out.append("|" + "|".join("---:" if numeric else ":---" for numeric in grid.numeric)
                   + "|")
        for row in grid.rows:
            out.append("| " + " | ".join(_markdown_escape(cell) for cell in row) + " |")
        out.append("")
    for note in report.footnotes():
        out.append(f"_{note}_  ")
    return "\n".join(out).rstrip() + "\n"


# -- for programs ----------------------------------------------------------------------

def record_columns(report: Report) -> list[str]:
    """Columns of a CSV report: the row keys, gpus, then the measured values."""
    columns = list(report.row_keys)
    if report.kind != "regular":
        columns.append("gpus")
        columns += ["time_ms", "throughput", "speedup", "efficiency", "samples"]
    else:
        columns += ["time_ms", "throughput", "samples"]
    return columns


def render_csv(report: Report) -> str:
    """One line per cell; footnotes are not part of CSV (the CLI prints them on stderr)."""
    columns = record_columns(report)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for record in report.records():
        writer.writerow([csv_cell(record.get(column)) for column in columns])
    return buffer.getvalue()


def report_document(report: Report) -> dict[str, Any]:
    """The JSON document of a report (versioned like every file dlbs writes)."""
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_FORMAT_VERSION,
        "type": report.kind,
        "scale": report.scale_label,
        "rows": report.records(),
        "counted": report.counted,
        "not_counted": dict(sorted(report.not_counted.items())),
        "incomplete": report.incomplete,
        "superseded": report.superseded,
        "notes": report.footnotes(),
    }


def render_json(report: Report) -> str:
    """The report document as indented JSON."""
    return to_json(report_document(report))
