"""Which trace file a `dlbs trace` argument means: a trace, a log, a database or a folder.

- A gzip file or a JSON file is the trace itself.
- A folder holds traces: the `*.trace.json.gz` and `*.trace.json` files under it (the
  names dlbs gives them), and those its `results.db` names. With one, that is the trace;
  with several, `dlbs trace` lists them; with `--id`, its `results.db` is the source.
- A results database (SQLite) needs the experiment's id (`--id`), unless one experiment
  alone has a trace; its newest attempt that wrote a trace gives `results.trace_file`.
- Anything else is read as a log: its `results.trace_file` line, which the backend prints
  once it has written the trace (in a log of dlbs, only when it names the planned trace:
  results.protocol.backend_output).
A relative path in a log or a database is found from the current folder first, then from the
folder of the log or database.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dlbs.results.protocol import parse_log
from dlbs.results.store import (
    is_store,
    is_store_url,
    open_store,
    refuse_unsupported_url,
    store_name,
)
from dlbs.traces.reader import GZIP_MAGIC, TraceError
from dlbs.util.regular_files import head, special_kind

TRACE_KEY = "results.trace_file"
#: The names of trace files that a folder is searched for (exp.trace_file's default suffix).
TRACE_SUFFIXES = (".trace.json.gz", ".trace.json")
#: The database a folder of logs holds (exp.log_dir's `results.db`).
FOLDER_DATABASE = "results.db"


@dataclass(frozen=True)
class Located:
    """A trace file and where it was named (for titles and messages)."""

    path: str
    source: str
    exp_id: str | None = None

    @property
    def label(self) -> str:
        return f"{self.source} (experiment {self.exp_id})" if self.exp_id else self.source


def locate(source: str, exp_id: str | None = None) -> Located:
    """The trace that `source` (and, for a database, `exp_id`) names."""
    refuse_special(source)
    if is_store_url(source):
        return _from_database(source, exp_id)
    if not os.path.exists(source):
        raise TraceError(f"{source}: no such file")
    if os.path.isdir(source):
        database = database_in(source)
        if exp_id is not None and database is not None:
            return _from_database(database, exp_id)
        found = traces_in(source)
        if len(found) != 1:
            raise TraceError(f"{source} holds {len(found)} traces" +
                             (" (dlbs trace lists them)" if found else ""),
                             hint="name one of them, a log or a results database with --id"
                             if found else "run an experiment with exp.trace_level set "
                                           "(docs/tracing.md)")
        return Located(found[0], source)
    if is_store(source):
        return _from_database(source, exp_id)
    if exp_id is not None:
        raise TraceError(f"--id {exp_id}: {source} is not a results database",
                         hint="--id selects an experiment of a results database")
    if _looks_like_trace(source):
        return Located(source, source)
    return _from_log(source)


def refuse_special(source: str) -> None:
    """Refuse at once a URL of no store, a FIFO (waited on for ever) or a device (no end)."""
    refuse_unsupported_url(source)
    kind = None if is_store_url(source) else special_kind(source)
    if kind is not None:
        raise TraceError(f"cannot read {source}: it is {kind}, not a regular file",
                         hint="name a trace, a log, a results database or a folder")


def database_in(folder: str) -> str | None:
    """The folder's results database (`results.db`, as exp.log_dir holds it), if any."""
    database = os.path.join(folder, FOLDER_DATABASE)
    return database if is_store(database) else None


def traces_in(folder: str) -> list[str]:
    """The trace files of a folder, sorted: by their names, and as its results.db names them."""
    found = {os.path.realpath(path): str(path) for path in Path(folder).rglob("*")
             if path.name.endswith(TRACE_SUFFIXES) and path.is_file()}
    database = database_in(folder)
    if database is not None:
        with open_store(database, read_only=True) as store:  # a reader (docs/security.md)
            named = {a.results.get(TRACE_KEY) for a in store.attempts()}
        for trace in sorted(t for t in named if isinstance(t, str) and t):
            try:
                path = _existing(trace, database)
            except TraceError:  # deleted since: what the folder holds is what there is
                continue
            found.setdefault(os.path.realpath(path), path)
    return sorted(found.values())


def _looks_like_trace(path: str) -> bool:
    try:
        start = head(path, 4096)
    except OSError as error:
        raise TraceError(f"cannot read {path}: {error.strerror or error}") from None
    return start.startswith(GZIP_MAGIC) or start.lstrip(b" \t\r\n")[:1] in (b"{", b"[")


def _from_log(path: str) -> Located:
    parsed = parse_log(path)
    values = {**(parsed.header or {}), **parsed.output()[0]}   # a trace elsewhere is no trace
    trace = values.get(TRACE_KEY)
    if not isinstance(trace, str) or not trace:
        level = values.get("exp.trace_level")
        why = f" (exp.trace_level is {level})" if level in (None, "none") and \
            "exp.trace_level" in values else ""
        raise TraceError(f"the log {path} names no trace file ({TRACE_KEY}){why}",
                         hint="run the experiment with exp.trace_level set (docs/tracing.md)")
    return Located(_existing(trace, path), path, values.get("exp.id"))


def _from_database(location: str, exp_id: str | None) -> Located:
    path = store_name(location)
    with open_store(location, read_only=True) as store:  # a reader (docs/security.md)
        attempts = store.attempts(exp_id) if exp_id else store.attempts()
    traced = [a for a in attempts if isinstance(a.results.get(TRACE_KEY), str)
              and a.results[TRACE_KEY]]
    if exp_id is None:
        ids = sorted({attempt.exp_id for attempt in traced})
        if len(ids) != 1:
            listed = ", ".join(ids[:10]) + (" ..." if len(ids) > 10 else "")
            raise TraceError(f"{path}: {len(ids)} experiments have traces"
                             + (f" ({listed})" if ids else ""),
                             hint="choose one with --id EXP_ID" if ids else
                             "run an experiment with exp.trace_level set (docs/tracing.md)")
        exp_id = ids[0]
    elif not attempts:
        raise TraceError(f"{path} holds no experiment {exp_id}")
    if not traced:
        raise TraceError(f"experiment {exp_id} in {path} has no trace ({TRACE_KEY})",
                         hint="run it with exp.trace_level set and exp.rerun always")
    newest = max(traced, key=lambda attempt: attempt.attempt)
    return Located(_existing(newest.results[TRACE_KEY], path), path, exp_id)


def _existing(trace: str, named_in: str) -> str:
    """`trace` as found from here, else from the folder of the file that names it."""
    candidates = [trace]
    if not os.path.isabs(trace):
        candidates.append(os.path.join(os.path.dirname(os.path.abspath(named_in)), trace))
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    raise TraceError(f"the trace file {trace} named in {named_in} does not exist")
