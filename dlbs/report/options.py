"""What `dlbs report` was asked for (the CLI's options, as data)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dlbs.report.select import Filter


@dataclass
class Options:
    """What `dlbs report` was asked for."""

    kind: str = "regular"
    by: Sequence[str] | None = None
    filters: Sequence[Filter] = ()
    columns: Sequence[str] | None = None
    latest: bool = False
    # "latest": each experiment's newest ok run; "each": every ok run, a cell each
    runs: str = "latest"
    # regular only: the baseline rows (--baseline KEY=GLOB), for the speedup column
    baseline: Sequence[Filter] = ()
    # pivot only
    rows: Sequence[str] | None = None
    cols: str | None = None
    value: str | None = None
