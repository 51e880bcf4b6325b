"""Reports as text, markdown, CSV or JSON (the HTML page: html.py).

Text and markdown are for people: identity keys with one value everywhere are listed once
above the tables, scaling and pivot reports spread their column axis (GPU counts, the
pivot's key) over the columns, numbers are rounded to significant digits (numbers.py) and a
cell's notes (notes.py) stand in a `notes` column, or, beside a column axis, as a marker
`[k]` after the value with the note under the tables. CSV and JSON are for programs: one
record per cell with every key and the stored values exactly, whatever they are. Text is
laid out here rather than by rich, column by column, each distinct key value formatted once:
a report of 100,000 experiments must render in well under a second.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.report.document import Report, TablePart, where
from dlbs.report.keys import NUMERIC, title
from dlbs.report.metrics import CellValues
from dlbs.report.numbers import significant, significant_all
from dlbs.report.scaling import SCALE
from dlbs.report.select import as_text
from dlbs.results.output import csv_cell, csv_field, csv_quoted, to_json
from dlbs.util.spreadsheet import csv_text

FORMATS = ("text", "markdown", "csv", "json")
REPORT_FORMAT = "dlbs-report"
# 3: values as stored (2 rounded them to 2 decimals); the fields run, runs and notes
# instead of samples; incomplete counts what the experiments left out lack.
REPORT_FORMAT_VERSION = 3

MISSING = "-"
NOTES_TITLE = "notes"


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


def number(value: Any) -> str:
    """A value's text for people: numbers to significant digits (numbers.py)."""
    if value is None:
        return MISSING
    return significant(value) if isinstance(value, float) else as_text(value)


def numbers(values: CellValues, order: np.ndarray) -> list[str]:
    """`number()` of the cells `order`, each distinct other value formatted once."""
    texts = significant_all(values.numbers[order])
    if values.others:
        for position, cell in enumerate(order.tolist()):
            if cell in values.others:
                texts[position] = number(values.others[cell])
    return texts


def key_text(value: Any) -> str:
    """A row key's text."""
    text = as_text(value)
    return text if text != "" else MISSING


def header_lines(report: Report) -> list[str]:
    """The report's title, the constant keys, and which statistic its times are."""
    lines = [report.heading]
    if report.constants:
        lines.append("All rows: " + ", ".join(f"{title(key)} {key_text(value)}"
                                              for key, value in report.constants) + ".")
    shown = {item.key for item in report.metrics}
    said = [text for key, text in STATISTICS if key in shown]
    if said:
        lines.append("Values: " + "; ".join(said) + ".")
    return lines


#: What a value column is computed from, said above a report that shows it: `dlbs compare`
#: and `dlbs history` follow the median batch time, a report's batch time is the mean.
STATISTICS = (
    ("results.time", "batch time is the mean of each run's timed batches (dlbs compare and "
                     "dlbs history follow their median, results.time_median)"),
    ("results.time_median", "median batch time is the median of each run's timed batches"),
    ("results.throughput", "throughput is the effective batch over the mean batch time"),
)


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
        columns.extend(numbers(cells.values[item.key], order) for item in report.metrics)
        headers = key_headers + [item.title for item in report.metrics]
        numeric = key_numeric + [True] * len(report.metrics)
        if any(cell in cells.notes for cell in order.tolist()):
            shown = _note_marks(report)[0]
            columns.append([shown.get(cell, "") for cell in order.tolist()])
            headers.append(NOTES_TITLE)
            numeric.append(False)
        return [Grid("", headers, numeric, columns)]
    axis = report.columns
    rows = cells.row[order]
    places = cells.place[order]
    markers = _markers(report)
    grids = []
    for item in report.metrics:
        table = np.full((len(axis), cells.rows), MISSING, dtype=object)
        texts = numbers(cells.values[item.key], order)
        for position, cell in enumerate(order.tolist()):
            if cell in markers:
                texts[position] += f" [{markers[cell]}]"
        table[places, rows] = texts
        grids.append(Grid(f"{item.title}, by {_axis_title(report)}",
                          key_headers + [key_text(column) for column in axis],
                          key_numeric + [True] * len(axis), [*row_texts, *table.tolist()]))
    return grids


def _markers(report: Report) -> dict[int, int]:
    """Cell -> its note's number `k` (tables with a column axis: `[k]`), in display order."""
    cells = report.table_cells
    if cells is None or report.column_key is None or not cells.notes:
        return {}
    noted = [cell for cell in report.displayed().tolist() if cell in cells.notes]
    return {cell: number for number, cell in enumerate(noted, 1)}


def cell_note_lines(report: Report) -> list[str]:
    """The notes that markers `[k]` point to, one line each.

    A table with a column axis marks each noted cell; one without shows its notes in a
    column, a long one (LoadGen's reasons, a statistics warning) as its first word and a
    marker, its text once under the table however many rows it stands beside.
    """
    cells = report.table_cells
    if cells is None:
        return []
    if report.column_key is None:
        return _note_marks(report)[1]
    return [f"[{number}] {where(report, cell, None)}: {'; '.join(cells.notes[cell])}"
            for cell, number in _markers(report).items()]


#: A note longer than this is a word and a marker in a notes column (its text below).
SHORT_NOTE = 40


def _note_marks(report: Report) -> tuple[dict[int, str], list[str]]:
    """Cell -> its notes column's text, and the lines of the long notes (see above)."""
    cells = report.table_cells
    assert cells is not None
    numbers: dict[str, int] = {}
    shown: dict[int, str] = {}
    for cell in report.displayed().tolist():
        found = cells.notes.get(cell)
        if not found:
            continue
        parts = []
        for text in found:
            if len(text) <= SHORT_NOTE:
                parts.append(text)
                continue
            number = numbers.setdefault(text, len(numbers) + 1)
            parts.append(f"{_note_word(text)} [{number}]")
        shown[cell] = "; ".join(parts)
    return shown, [f"[{number}] {text}" for text, number in numbers.items()]


def _note_word(text: str) -> str:
    """A note's first words: `INVALID (LoadGen): why` is `INVALID`, `warning: x` `warning`."""
    return text.split(":", 1)[0].split(" (", 1)[0].strip() or "note"


def _key_texts(codes: np.ndarray, table: Any) -> list[str]:
    """key_text of each code's value, each distinct value formatted once."""
    texts = {code: key_text(table[code]) for code in np.unique(codes).tolist()}
    return list(map(texts.__getitem__, codes.tolist()))


def _axis_title(report: Report) -> str:
    if report.column_key == SCALE:
        return f"number of {report.scale_label}"
    return report.column_title


# -- text ------------------------------------------------------------------------------

def render_text(report: Report) -> str:
    """Plain ASCII: columns separated by two blanks, a rule of dashes under the header."""
    out = header_lines(report)
    for grid in layout(report):
        out.append("")
        if grid.title:
            out.append(grid.title)
        out.extend(aligned(grid))
    marked = cell_note_lines(report)
    if marked:
        out.append("")
        out.extend(marked)
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
    for line in cell_note_lines(report):
        out.append(f"{_markdown_escape(line)}  ")
    if cell_note_lines(report):
        out.append("")
    for note in report.footnotes():
        out.append(f"_{_markdown_escape(note)}_  ")
    return "\n".join(out).rstrip() + "\n"


# -- for programs ----------------------------------------------------------------------

def render_csv(report: Report) -> str:
    """One line per cell; footnotes are not part of CSV (the CLI prints them on stderr).

    As the csv module writes it (QUOTE_MINIMAL): text as is, numbers exactly as stored
    (numbers.exact: a float as Python's repr writes it, an integral one as an integer),
    lists and objects as JSON, None as an empty field.
    """
    columns = [_csv_part(part) for part in report.table_parts()]
    lines = [",".join(csv_quoted(csv_text(name)) for name in report.fields())]
    lines.extend(map(",".join, zip(*columns)))
    return "\n".join(lines) + "\n"


def _csv_part(part: TablePart) -> list[str]:
    """One field's CSV text on every line, each distinct value formatted once."""
    if part.values is not None:
        assert part.codes is not None
        return _csv_numbers(part.values, part.codes)
    if part.each is not None:
        return [_csv_text(value) for value in part.each]
    if part.table is not None:
        assert part.codes is not None
        texts = [_csv_text(value) for value in part.table]
        return list(map(texts.__getitem__, part.codes.tolist()))
    return [_csv_text(part.same)] * part.size


def _csv_text(value: Any) -> str:
    if isinstance(value, str):
        return csv_quoted(csv_field(value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return csv_quoted(str(value))
    return csv_quoted(csv_cell(value))


def _csv_numbers(values: CellValues, order: np.ndarray) -> list[str]:
    """Cell values exactly as stored (numbers.exact): repr of a float, an integer as one."""
    numbers = values.numbers[order]
    texts = list(map(repr, numbers.tolist()))
    for position in np.flatnonzero(~np.isfinite(numbers)).tolist():
        texts[position] = ""
    if values.others:
        for position, cell in enumerate(order.tolist()):
            if cell in values.others:
                texts[position] = _csv_text(values.others[cell])
    return texts


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
        "incomplete": dict(sorted(report.incomplete.items())),
        "latest_not_ok": report.latest_not_ok,
        "duplicates": report.duplicates,
        "notes": report.footnotes(),
    }


def render_json(report: Report) -> str:
    """The report document as indented JSON."""
    return to_json(report_document(report))
