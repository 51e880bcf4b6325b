"""Writing results out: experiments as JSON or CSV."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dlbs.util import exact_json
from dlbs.util.spreadsheet import csv_text


def to_json(document: Any) -> str:
    """Indented JSON, keys in the order they were read; NaN and Infinity become null."""
    return exact_json.dumps(document, indent=True) + "\n"


def experiment_columns(experiments: Sequence[dict[str, Any]]) -> list[str]:
    """Every key of `experiments`: exp.id, then exp.*, then results.*, then the rest."""
    keys: set[str] = set()
    for experiment in experiments:
        keys.update(experiment)

    def order(key: str) -> tuple[int, str]:
        if key == "exp.id":
            return (0, key)
        if key.startswith("exp."):
            return (1, key)
        if key.startswith("results."):
            return (2, key)
        return (3, key)

    return sorted(keys, key=order)


def csv_cell(value: Any) -> str:
    """A value as a CSV cell: text as is, lists and objects as JSON, None as empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return exact_json.dumps(value)


def csv_field(value: Any) -> str:
    """`csv_cell` as the CSV writers write it: text kept from running as a formula.

    Text that a spreadsheet would run gets a `'` first (`util.spreadsheet`); numbers, lists
    and objects are left alone.
    """
    return csv_text(value) if isinstance(value, str) else csv_cell(value)


def records_to_csv(columns: Sequence[str], records: Iterable[Mapping[str, Any]]) -> str:
    """A header of `columns`, then one row per record (`csv_cell` of each column's value)."""
    return rows_to_csv(columns, ([record.get(column) for column in columns]
                                 for record in records))


def rows_to_csv(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A header of `columns`, then one line per row of values (`csv_field` of each).

    The one CSV writer of dlbs's commands (a report writes its columns with the same
    `csv_quoted`): text that a spreadsheet would run as a formula is kept text, and a
    field holding a comma, a quote, a line feed or a carriage return is quoted (the csv
    module leaves a lone carriage return bare when lines end in a line feed, and a reader
    then splits the row there).
    """
    lines = [",".join(csv_quoted(csv_text(column)) for column in columns)]
    lines.extend(",".join(csv_quoted(csv_field(value)) for value in row) for row in rows)
    return "\n".join(lines) + "\n"


#: What makes a CSV field quoted (RFC 4180).
CSV_SPECIAL = (",", '"', "\r", "\n")


def csv_quoted(text: str) -> str:
    """`text` as one CSV field: quoted (quotes doubled) when it holds CSV_SPECIAL."""
    if any(special in text for special in CSV_SPECIAL):
        return '"' + text.replace('"', '""') + '"'
    return text


def experiments_to_csv(experiments: Sequence[dict[str, Any]]) -> str:
    """One row per experiment, one column per key (see `experiment_columns`)."""
    return records_to_csv(experiment_columns(experiments), experiments)
