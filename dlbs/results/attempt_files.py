"""Where an attempt's log is, from what its row holds: its log path, its run folder.

A store row keeps the absolute path of the attempt's log (from schema version 4's runs on:
`dlbs run` records `os.path.abspath` of the log it created), the host that ran it and the
run folder (the absolute log folder, `run_folder`). Rows of older runs kept the log's path
relative to the folder `dlbs run` was started in, which no reader knows; it is found again
from the run folder, which ends with the log folder that the relative path starts with
(`logs` of `/home/me/bench/logs` and `logs/x.log`): `resolve_log_path`.

Which of those files a reader may show (`attempt_log`, `attempt_trace`): only the
attempt's own, inside its run folder, as the run wrote them (docs/security.md, "Trust
boundaries"); `dlbs serve` shows them so.
"""

from __future__ import annotations

import os
import posixpath
import stat

from dlbs.results.protocol import HEADER_START, TRACE_KEY, parse_log
from dlbs.util.regular_files import head


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


class NotShown(Exception):
    """Why a file a row names is not shown (the reason is for the page, one line)."""


def attempt_log(exp_id: str, log_path: str | None, run_folder: str | None,
                moved_to: str | None = None) -> str:
    """The attempt's own log, as a reader may show it; NotShown says why not.

    A store row is data written by whoever could write the store (docs/security.md, "Trust
    boundaries"), so what it names is shown only when it is this attempt's log, as the run
    wrote it:
    - inside the attempt's run folder (`run_folder`, absolute), once links are resolved: a
      row naming `~/.pgpass`, or a link in the folder that leads out of it, shows nothing;
    - a regular file;
    - whose first line is the header `dlbs run` wrote for this experiment
      (`# dlbs <version>: experiment <exp_id>, ...`): a file of the run folder that is not
      this experiment's log is not shown either.
    `moved_to`: where the run folder may be now (an SQLite store's folder, copied or moved
    with its logs): the same path under it is tried when the run folder holds no such file.
    """
    if not isinstance(log_path, str) or not log_path:
        raise NotShown("the attempt has no log")
    if not isinstance(run_folder, str) or not os.path.isabs(run_folder):
        raise NotShown(f"the log {log_path} is not shown: the attempt has no run folder "
                       "recorded (it was stored before dlbs recorded runs), and only a log "
                       "inside its attempt's run folder is shown")
    found = _inside(log_path_candidates(log_path, run_folder), run_folder, moved_to, log_path)
    try:   # never waits on a FIFO put there since it was looked at
        first = head(found, 4096).split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r")
    except OSError as error:
        raise NotShown(f"the log {log_path} cannot be read: "
                       f"{error.strerror or 'not a regular file'}") from None
    if not (HEADER_START.match(first) and first.split(": experiment ", 1)[1]
            .startswith(f"{exp_id},")):
        raise NotShown(f"{log_path} is not shown: it is not the log dlbs run wrote for "
                       f"experiment {exp_id} (its first line is not that log's header)")
    return found


def attempt_trace(exp_id: str, log: str, run_folder: str, moved_to: str | None = None) -> str:
    """The trace of an attempt whose log `attempt_log` found, or NotShown with the reason.

    The trace is the one the log names (not what the row says): the planned
    `exp.trace_file` of its header that the backend printed as written
    (`protocol.backend_output`), inside the same run folder, a regular file. (Whether it is
    a trace dlbs wrote is the trace reader's to check.)
    """
    parsed = parse_log(log)
    taken, _ = parsed.output()
    trace = taken.get(TRACE_KEY)
    if not isinstance(trace, str) or not trace:
        planned = (parsed.header or {}).get("exp.trace_level")
        raise NotShown("no trace" + (f" (exp.trace_level is {planned}; run with it set: "
                                     "docs/tracing.md)" if planned in (None, "none") else
                                     " (the log names none it wrote)"))
    return _inside([trace], run_folder, moved_to, trace)


def _inside(candidates: list[str], run_folder: str, moved_to: str | None, named: str) -> str:
    """The first candidate that is a regular file inside the run folder (or where it moved)."""
    roots = [run_folder]
    if moved_to is not None and os.path.isabs(moved_to):
        roots.append(moved_to)
    outside = False
    for root in roots:
        real_root = os.path.realpath(root)
        for candidate in candidates:
            path = candidate if root == run_folder else _moved(candidate, run_folder, root)
            if path is None:
                continue
            real = os.path.realpath(path)
            if os.path.commonpath([real, real_root]) != real_root or real == real_root:
                outside = True
                continue
            try:
                if stat.S_ISREG(os.stat(real).st_mode):
                    return real
            except OSError:
                continue
    if outside:
        raise NotShown(f"{named} is not shown: only files inside the attempt's run folder "
                       f"{run_folder} are")
    raise NotShown(f"{named} is not on this machine (nor in the folder of the store)")


def _moved(path: str, run_folder: str, root: str) -> str | None:
    """`path` of the run folder, as it would be under `root` (None when not inside it)."""
    folder = os.path.normpath(run_folder)
    normal = os.path.normpath(path)
    if os.path.commonpath([normal, folder]) != folder:
        return None
    return os.path.join(root, os.path.relpath(normal, folder))
