"""Report kinds, found through a table as commands are (dlbs/cli/main.py).

Each kind is one module of this package that defines `KIND`, a `ReportKind` (base.py): which
experiments it shows, its row keys, its values and its column axis, its title and its chart.
Tables (tables.py), renderers and charts ask the kind; none of them names one. A new kind is
a new module here and a line in `KINDS`.

This module imports nothing heavy: `dlbs report --help` reads the table.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from dlbs.report.kinds.base import ReportKind

# kind -> (module, one-line help)
KINDS: dict[str, tuple[str, str]] = {
    "regular": ("dlbs.report.kinds.regular", "one row per experiment"),
    "efficiency": ("dlbs.report.kinds.efficiency",
                   "a regular report's rows: throughput, energy per sample, power, MFU, "
                   "peak memory (docs/efficiency.md)"),
    "weak": ("dlbs.report.kinds.weak", "the same replica batch across GPU counts"),
    "strong": ("dlbs.report.kinds.strong", "the same effective batch across GPU counts"),
    "pivot": ("dlbs.report.kinds.pivot", "--value by --rows and --cols"),
    "latency": ("dlbs.report.kinds.token_latency",
                "the LoadGen performance scenarios (docs/evaluation.md), and the decoders' "
                "token latencies (docs/llm-serving.md)"),
    "accuracy": ("dlbs.report.kinds.accuracy", "the accuracy scenario (docs/evaluation.md)"),
}
NAMES = tuple(KINDS)


def report_kind(name: str) -> ReportKind:
    """The kind `name` (its module's KIND); an unknown name raises ResultsError."""
    entry = KINDS.get(name)
    if entry is None:
        from dlbs.errors import ResultsError

        raise ResultsError(f"unknown report type {name!r}; expected one of {', '.join(NAMES)}")
    kind: ReportKind = importlib.import_module(entry[0]).KIND
    return kind
