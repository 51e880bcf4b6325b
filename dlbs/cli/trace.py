"""`dlbs trace`: where a traced experiment's time went (docs/tracing.md).

`dlbs trace SOURCE [--id EXP_ID] [--view VIEW] [--top N] [--sort KEY]
[--format table|json|csv] [-o FILE]`, SOURCE a trace, a log, a results database or a folder;
with two traces (two sources, or one database and two `--id`), their tables side by side
with the ratio. A folder of several traces is listed, one row each, for the user to choose.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from dlbs.errors import DlbsError

VIEWS = ("summary", "layers", "layer_tree", "operators", "kernels", "eventflow", "duration")
SORTS = ("total", "self", "mean", "count")
FORMATS = ("table", "json", "csv")
#: The widest text cell of a table.
NAME_WIDTH = 100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `dlbs trace` (choices spelled here to keep imports light)."""
    parser.add_argument(
        "sources", nargs="+", metavar="SOURCE",
        help="a trace (.json.gz or .json), an experiment's log, a results database (with "
             "--id), or a folder (its one trace; several are listed); two of them compare "
             "their traces")
    parser.add_argument(
        "--id", dest="ids", action="append", default=[], metavar="EXP_ID",
        help="the experiment of a results database (once per database; twice with one "
             "database compares two of its experiments)")
    parser.add_argument("--view", choices=VIEWS, default="summary",
                        help="summary (default): a step's time by category; layers: per "
                             "layer, inclusive and self; layer_tree: the module hierarchy, "
                             "inclusive and exclusive; operators: per framework operator, "
                             "self time, calls, input shapes; kernels: GPU kernels per "
                             "layer; eventflow: events in time order; duration: per traced "
                             "batch")
    parser.add_argument("--top", type=int, default=None, metavar="N",
                        help="only the first N rows (eventflow: the first 1000 events by "
                             "default, 0 = all)")
    parser.add_argument("--sort", choices=SORTS, default=None,
                        help="layers, layer_tree, operators, kernels: by total (inclusive) "
                             "time (the default; operators: self; layer_tree: the model's "
                             "order), self time (not kernels), mean time or count")
    parser.add_argument("--format", dest="fmt", choices=FORMATS, default="table",
                        help="table (default), json or csv")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write to FILE (atomically) instead of stdout")


def _pairs(sources: list[str], ids: list[str]) -> list[tuple[str, str | None]]:
    """(source, experiment id) of each trace to read."""
    from dlbs.results.store import is_store
    from dlbs.traces.locate import database_in, refuse_special

    if len(sources) > 2:
        raise DlbsError("dlbs trace reads one trace, or two to compare",
                        hint="give one or two sources")
    for source in sources:
        refuse_special(source)
    databases = [source for source in sources if is_store(source) or
                 (os.path.isdir(source) and database_in(source) is not None)]
    if len(sources) == 1 and databases and len(ids) == 2:
        return [(sources[0], ids[0]), (sources[0], ids[1])]
    if ids and not databases:
        raise DlbsError(f"--id {ids[0]}: {sources[0]} is not a results database",
                        hint="--id selects an experiment of a results database")
    if len(ids) > len(databases):
        raise DlbsError(f"{len(ids)} --id for {len(databases)} results database(s)",
                        hint="--id selects an experiment of a results database: one per "
                             "database (two with a single database, to compare)")
    remaining = list(ids)
    return [(source, remaining.pop(0) if source in databases and remaining else None)
            for source in sources]


def run(args: argparse.Namespace) -> int:
    """Read the trace(s), compute the view, print or write it."""
    from dlbs.cli.output import emit
    from dlbs.traces.compare import compare
    from dlbs.traces.locate import locate, traces_in
    from dlbs.traces.reader import TraceFile
    from dlbs.traces.views import listing, view
    from dlbs.util.terminal import one_line

    if args.top is not None and args.top < 0:
        raise DlbsError(f"--top {args.top}: expected a count (0 = all)")
    folder = args.sources[0] if len(args.sources) == 1 and not args.ids and \
        os.path.isdir(args.sources[0]) else None
    found = traces_in(folder) if folder is not None else []
    if len(found) > 1:
        table, titles = listing([TraceFile(path) for path in found]), [folder]
    else:
        located = [locate(source, exp_id) for source, exp_id in _pairs(args.sources, args.ids)]
        tables = [view(args.view, TraceFile(item.path), sort=args.sort,
                       top=None if len(located) > 1 else args.top) for item in located]
        table = tables[0] if len(tables) == 1 else compare(tables[0], tables[1], top=args.top)
        titles = [item.label if item.path == item.source else f"{item.label}: {item.path}"
                  for item in located]
    text = render(table, args.fmt, titles)
    emit(text, args.fmt, args.output)
    if args.fmt != "table":
        for note in table.notes:
            print(f"dlbs trace: {one_line(note)}", file=sys.stderr)
    return 0


# -- rendering ----------------------------------------------------------------------------
def render(table: Any, fmt: str, titles: list[str]) -> str:
    """The table as text (aligned columns), JSON or CSV."""
    if fmt == "json":
        from dlbs.results.output import to_json

        return to_json({"view": table.view, "traces": titles, "steps": table.steps,
                        "columns": table.columns, "rows": table.rows, "notes": table.notes})
    if fmt == "csv":
        from dlbs.results.output import records_to_csv

        return records_to_csv(table.columns, table.rows)
    return _text(table, titles)


def _text(table: Any, titles: list[str]) -> str:
    letters = "ab" if len(titles) > 1 else ""
    lines = [f"{table.view} of " + "; ".join(
        f"{letter}: {title}" if letter else title for letter, title in
        zip(letters or [""], titles)) + (f" ({table.steps} traced steps)" if table.steps else "")]
    if table.rows:
        headers = list(table.columns)
        cells = [[_cell(column, row.get(column), row) for column in headers]
                 for row in table.rows]
        numeric = [all(isinstance(row.get(column), int | float) or row.get(column) is None
                       for row in table.rows) and column not in ("layer", "tid", "pid")
                   for column in headers]
        widths = [max([len(header), *(len(cells_row[i]) for cells_row in cells)])
                  for i, header in enumerate(headers)]

        def line(values: list[str]) -> str:
            return "  ".join(text.rjust(width) if is_number else text.ljust(width)
                             for text, width, is_number in zip(values, widths, numeric)).rstrip()

        lines += [line(headers), "  ".join("-" * width for width in widths),
                  *(line(row) for row in cells)]
    lines += [f"note: {note}" for note in table.notes]
    return "\n".join(lines) + "\n"


def _cell(column: str, value: Any, row: dict[str, Any]) -> str:
    if value is None:
        return ""
    if column == "layer" and "depth" in row and "inclusive_ms" in row:
        return "  " * int(row["depth"]) + str(value)
    if column.endswith("share"):
        return f"{value * 100:.1f}%"
    if column == "ratio":
        return f"{value:.3f}"
    if isinstance(value, float):
        return f"{value:.3f}"
    text = str(value)
    # Kernel names run to hundreds of characters; json and csv keep them whole.
    return text if len(text) <= NAME_WIDTH else text[:NAME_WIDTH - 3] + "..."
