"""What reports, charts and comparisons read: their inputs, a folder through its database.

A log folder that `dlbs run` wrote holds `results.db` beside the logs (`runtime.results_db`):
every attempt with the environment it ran in (host, GPU and CPU models, driver), which logs
do not carry. So a folder given to `dlbs report`, `plot` or `compare` is read through the
`results.db` of each of its folders that has one, and only the logs that database does not
know (by file name: a log copied in from elsewhere) are parsed; a folder without one is read
from its logs as before.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from dlbs.results.columns import Attempts
from dlbs.results.sources import find_logs, load_attempts
from dlbs.results.store import is_store

DATABASE = "results.db"


def load_inputs(paths: Sequence[str | os.PathLike[str]], *,
                latest_only: bool = False) -> Attempts:
    """The attempts of `paths` (results.sources.load_attempts), folders as the module says."""
    sets: list[Attempts] = []
    pending: list[str] = []

    def flush() -> None:
        if pending:
            sets.append(load_attempts(list(pending), latest_only=latest_only))
            pending.clear()

    for raw in paths:
        path = os.fspath(raw)
        found = databases(path) if os.path.isdir(path) else []
        if not found:
            pending.append(path)
            continue
        flush()
        known: set[str] = set()
        for database in found:
            stored = load_attempts([database], latest_only=latest_only)
            sets.append(stored)
            column = stored.column("results.log_file")
            folder = os.path.dirname(database)
            known.update(os.path.normpath(os.path.join(folder, os.path.basename(str(value))))
                         for value in column.values if value)
        pending.extend(log for log in find_logs(path) if os.path.normpath(log) not in known)
        flush()
    flush()
    return sets[0] if len(sets) == 1 else Attempts.concat(sets)


def databases(folder: str) -> list[str]:
    """The `results.db` of `folder` and of every folder under it, in a stable order."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        if DATABASE in files and is_store(os.path.join(root, DATABASE)):
            found.append(os.path.join(root, DATABASE))
    return found
