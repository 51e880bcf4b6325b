"""Where an attempt's log is, from what its row holds: its log path, its run folder.

A store row keeps the absolute path of the attempt's log (from schema version 4's runs on:
`dlbs run` records `os.path.abspath` of the log it created), the host that ran it and the
run folder (the absolute log folder, `run_folder`). Rows of older runs kept the log's path
relative to the folder `dlbs run` was started in, which no reader knows; it is found again
from the run folder, which ends with the log folder that the relative path starts with
(`logs` of `/home/me/bench/logs` and `logs/x.log`): `resolve_log_path`.

Which of those files a reader may show is `dlbs serve`'s rule (dlbs/web), on top of this.
"""

from __future__ import annotations

import os
import posixpath


def log_path_candidates(log_path: str | None, run_folder: str | None) -> list[str]:
    """Where a stored log path may be, best first (see `resolve_log_path`)."""
    if not isinstance(log_path, str) or not log_path:
        return []
    if os.path.isabs(log_path):
        return [posixpath.normpath(log_path)]
    if not isinstance(run_folder, str) or not os.path.isabs(run_folder):
        return []
    folder = [part for part in posixpath.normpath(run_folder).split("/") if part]
    relative = [part for part in posixpath.normpath(log_path).split("/") if part != "."]
    found = []
    for overlap in range(min(len(folder), len(relative) - 1), 0, -1):
        if folder[len(folder) - overlap:] == relative[:overlap]:
            found.append("/" + "/".join(folder[:len(folder) - overlap] + relative))
    found.append(posixpath.normpath(posixpath.join(run_folder, log_path)))
    return list(dict.fromkeys(found))


def resolve_log_path(log_path: str | None, run_folder: str | None) -> str | None:
    """The absolute path of a stored log path: as it is when absolute, else from its run folder.

    A relative path `L/rest` of a run whose folder is `.../L` (L the log folder as the run
    named it) is `.../L/rest`: where an end of the run folder is what the relative path
    begins with, they meet there (the longest such end first); else the path is inside the
    run folder. Of these, the first that exists, else the first. None when there is no log,
    or a relative path and no run folder to resolve it against.
    """
    candidates = log_path_candidates(log_path, run_folder)
    return next((path for path in candidates if os.path.lexists(path)),
                candidates[0] if candidates else None)


def known_log_paths(rows: list[tuple[object, object]], database_folder: str) -> set[str]:
    """The logs a database knows, as normalised absolute paths, from (log_path, run_folder).

    Each log where its row says it is, and beside the database by its name (a folder that was
    moved or copied with its database keeps its logs there).
    """
    known: set[str] = set()
    for log_path, run_folder in rows:
        if not isinstance(log_path, str) or not log_path:
            continue
        known.update(log_path_candidates(
            log_path, run_folder if isinstance(run_folder, str) else None))
        known.add(os.path.normpath(os.path.join(os.path.abspath(database_folder),
                                                os.path.basename(log_path))))
    return known
