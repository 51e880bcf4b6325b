"""Two traces' tables of one view side by side: A's value, B's value and B / A.

Rows are matched on the view's key (a layer's name, a kernel's layer and name, a summary
category) and compared on its value column, which is per step or per call, so traces of
different lengths compare. A row only one trace has shows an empty cell for the other.
"""

from __future__ import annotations

from typing import Any

from dlbs.traces.views import Table, ViewError

#: The views whose rows mean the same thing in two traces.
COMPARABLE = ("summary", "layers", "layer_tree", "operators", "kernels")


def compare(first: Table, second: Table, top: int | None = None) -> Table:
    """A table of `first`'s view with the columns `a`, `b` and `ratio` (b / a)."""
    if first.view != second.view:
        raise ValueError(f"cannot compare a {first.view} table with a {second.view} table")
    if first.view not in COMPARABLE:
        raise ViewError(f"two traces compare in the {', '.join(COMPARABLE)} views, "
                        f"not in {first.view}")
    value = first.value
    columns = [*first.key, f"a_{value}", f"b_{value}", "ratio"]
    table = Table(first.view, columns, list(first.key), "ratio", steps=first.steps)
    second_rows = {_key(row, second.key): row for row in second.rows}
    seen = set()
    rows = []
    for row in first.rows:
        key = _key(row, first.key)
        seen.add(key)
        rows.append(_joined(first.key, key, row.get(value), second_rows.get(key, {}).get(value),
                            value))
    for key, row in second_rows.items():
        if key not in seen:
            rows.append(_joined(first.key, key, None, row.get(value), value))
    if first.view != "summary" and first.view != "layer_tree":
        rows.sort(key=lambda row: -max(row[f"a_{value}"] or 0, row[f"b_{value}"] or 0))
    table.rows = rows if not top or top < 0 else rows[:top]
    table.notes = [f"a: the first trace, b: the second; ratio = b / a of {value}",
                   *(f"a: {note}" for note in first.notes),
                   *(f"b: {note}" for note in second.notes)]
    return table


def _key(row: dict[str, Any], names: list[str]) -> tuple[Any, ...]:
    return tuple(row.get(name) for name in names)


def _joined(names: list[str], key: tuple[Any, ...], a: Any, b: Any,
            value: str) -> dict[str, Any]:
    row = dict(zip(names, key))
    row[f"a_{value}"] = a
    row[f"b_{value}"] = b
    row["ratio"] = b / a if isinstance(a, int | float) and isinstance(b, int | float) and a \
        else None
    return row
