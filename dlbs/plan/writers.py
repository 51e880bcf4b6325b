"""Write a plan as json, jsonl, csv or a text table, streaming experiment by experiment."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import IO, Any

import orjson

from dlbs.config.values import render
from dlbs.util.terminal import one_line

FORMATS = ("json", "jsonl", "table", "csv")


def write_plan(experiments: Iterable[dict[str, Any]], out: IO[bytes], fmt: str,
               keys: Sequence[str] | None) -> int:
    """Write every experiment to `out` (a binary stream); returns how many were written."""
    if fmt == "jsonl":
        return _jsonl(experiments, out, keys)
    if fmt == "json":
        return _json(experiments, out, keys)
    if fmt == "csv":
        return _csv(experiments, out, keys)
    return _table(experiments, out, keys)


def _select(experiment: dict[str, Any], keys: Sequence[str] | None) -> dict[str, Any]:
    if keys is None:
        return experiment
    return {key: experiment.get(key) for key in keys}


def _jsonl(experiments: Iterable[dict[str, Any]], out: IO[bytes],
           keys: Sequence[str] | None) -> int:
    count = 0
    dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    for experiment in experiments:
        out.write(dumps(_select(experiment, keys), option=newline))
        count += 1
    return count


def _json(experiments: Iterable[dict[str, Any]], out: IO[bytes],
          keys: Sequence[str] | None) -> int:
    count = 0
    for experiment in experiments:
        # Nothing is written before the first experiment resolves: a spec that fails at once
        # leaves the output empty.
        out.write(b"[\n" if count == 0 else b",\n")
        out.write(orjson.dumps(_select(experiment, keys), option=orjson.OPT_INDENT_2))
        count += 1
    out.write(b"\n]\n" if count else b"[]\n")
    return count


def _columns(first: dict[str, Any], keys: Sequence[str] | None) -> list[str]:
    return list(keys) if keys is not None else list(first)


def _csv(experiments: Iterable[dict[str, Any]], out: IO[bytes],
         keys: Sequence[str] | None) -> int:
    import csv
    import io

    text = io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=True)
    writer = None
    count = 0
    try:
        for experiment in experiments:
            if writer is None:
                columns = _columns(experiment, keys)
                writer = csv.writer(text)
                writer.writerow(columns)
            writer.writerow([_csv_cell(experiment.get(c)) for c in columns])
            count += 1
    finally:
        text.detach()
    return count


def _csv_cell(value: Any) -> str:
    """A value as `render` writes it; text that a spreadsheet would run is kept text."""
    from dlbs.util.spreadsheet import csv_text

    text = render(value, "")
    return csv_text(text) if isinstance(value, str) else text


def _table(experiments: Iterable[dict[str, Any]], out: IO[bytes],
           keys: Sequence[str] | None) -> int:
    rows: list[list[str]] = []
    columns: list[str] = []
    for experiment in experiments:
        if not columns:
            columns = ["#", *_columns(experiment, keys)]
        # A table is read on a terminal: a value's escapes are shown, not acted on.
        rows.append([str(len(rows) + 1),
                     *(one_line(render(experiment.get(c), "")) for c in columns[1:])])
    if not columns:
        out.write(b"(empty plan)\n")
        return 0
    out.write(aligned_table(columns, rows).encode())
    return len(rows)


def aligned_table(columns: Sequence[str], rows: Sequence[Sequence[str]],
                  rule: bool = True) -> str:
    """Columns of text padded to their widest cell (a `-` rule under the header)."""
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    if rule:
        lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines) + "\n"
