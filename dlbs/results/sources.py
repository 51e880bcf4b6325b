"""Experiments from wherever results are kept.

Log files, log folders, results databases, and the JSON that `dlbs parse` writes.

A folder is read as `dlbs run` left it: through the `results.db` of it and of each folder
under it (every attempt with the environment it ran in, the monitor's summaries, the run's
tag, host and folder, which logs do not carry), and then the logs none of those databases
knows (`folder_inputs`): so `dlbs parse`, `dlbs report` and `dlbs results copy` of a folder
read the same attempts, and a folder without a database is read from its logs.

Each experiment comes back as a `Record` (columns.py) with the place it came from and a
recency (when it ended), so that readers can keep the latest result of each `exp.id`;
reports and comparisons read the same inputs as columns (`load_attempts`).

Two levels of detail. `dlbs parse` reads everything (per-batch times and monitor series
included). Reports read summaries (summary.py): the parameters, the scalar results and the
statistics engine's values, without number series, and optionally the per-batch times as an
array; a database gives them from its summary columns without parsing the raw results.
Either way the statistics engine's values replace what the backend printed for the same keys.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import orjson

from dlbs.errors import ResultsError
from dlbs.results import stats
from dlbs.results.attempt_files import known_log_paths
from dlbs.results.columns import Attempts, Part, Record, RecordsPart
from dlbs.results.protocol import experiment_from_log, parse_log
from dlbs.results.schema import epoch
from dlbs.results.store import (
    is_store,
    is_store_url,
    open_store,
    refuse_unsupported_url,
    store_name,
)
from dlbs.results.summary import is_summary_value, summarize
from dlbs.results.view_codes import ENV_PREFIX

__all__ = ["Attempts", "Detail", "Loaded", "Record", "load_attempts", "load_experiments"]

# The file `dlbs parse -o x.json` writes: {"format": ..., "version": ..., "experiments": [...]}
EXPERIMENTS_FORMAT = "dlbs-experiments"
EXPERIMENTS_FORMAT_VERSION = 1
LOG_SUFFIX = ".log"
# A file named so is a database whatever it holds: refused when it is not one.
DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


@dataclass
class Loaded:
    """What `load_experiments` found."""

    records: list[Record] = field(default_factory=list)
    logs_read: int = 0
    # Files in a folder that hold no protocol line at all (not logs of ours): passed over.
    ignored_files: list[str] = field(default_factory=list)
    unparsable_lines: int = 0
    # Lines longer than protocol.MAX_LINE_BYTES, passed over; last lines cut short.
    too_long_lines: int = 0
    cut_lines: int = 0
    # Keys that benchmarks printed and that were not taken (protocol.backend_output), with
    # the number of logs that printed each.
    refused_keys: dict[str, int] = field(default_factory=dict)

    @property
    def experiments(self) -> list[dict[str, Any]]:
        """The experiments alone, in the order they were read."""
        return [record.experiment for record in self.records]


def find_logs(folder: str) -> list[str]:
    """Every regular file `*.log` under `folder`, recursively, in a stable order.

    A FIFO or a device named `*.log` is passed over: reading one would wait forever.
    """
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        found.extend(path for path in (os.path.join(root, name) for name in sorted(files)
                                       if name.endswith(LOG_SUFFIX)) if _is_regular(path))
    return found


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


@dataclass(frozen=True)
class Detail:
    """What to read: everything (`dlbs parse`), or summaries with or without per-batch times.

    `all_attempts` reads every attempt a database holds, not only the newest of each
    experiment (logs are one attempt each anyway).
    """

    summaries: bool = False
    samples: bool = False
    all_attempts: bool = False


FULL = Detail()


def load_experiments(paths: Sequence[str | os.PathLike[str]], detail: Detail = FULL) -> Loaded:
    """Read logs, folders (searched for *.log), results databases and `dlbs parse` JSON."""
    loaded = Loaded()
    recorded = RecordedStatuses()
    for kind, path in _inputs(paths):
        if kind in LOG_KINDS:
            _load_log(path, loaded, detail, recorded, named=kind == "log")
        elif kind == "database":
            _load_database(path, loaded, detail)
        elif kind == FOLDER_DATABASE:   # every attempt, as the folder's logs were read
            _load_database(path, loaded, Detail(detail.summaries, detail.samples, True))
        else:
            _load_json(path, loaded, detail)
    return loaded


def load_attempts(paths: Sequence[str | os.PathLike[str]], *,
                  latest_only: bool = False) -> Attempts:
    """What reports and comparisons read: the inputs' attempts as columns (columns.py).

    Logs and parse output are read as summaries with their per-batch times; a database is
    read column by column (stored_columns.py). `latest_only` keeps only the newest attempt of
    each experiment of a database (as its `experiments` view does; a log is one attempt).
    """
    from dlbs.results.stored_columns import StorePart

    parts: list[Part] = []
    rows: list[np.ndarray] = []
    pending = Loaded()

    def flush() -> None:
        if pending.records:
            parts.append(RecordsPart(pending.records))
            rows.append(np.arange(len(pending.records)))
            pending.records = []

    detail = Detail(summaries=True, samples=True)
    recorded = RecordedStatuses()
    for kind, path in _inputs(paths):
        if kind in LOG_KINDS:
            _load_log(path, pending, detail, recorded, named=kind == "log")
        elif kind == "json":
            _load_json(path, pending, detail)
        else:   # a database, named or of a folder
            flush()
            part = StorePart(path)
            parts.append(part)
            rows.append(part.latest_rows() if latest_only else np.arange(part.size))
    flush()
    return Attempts(parts, rows)


def _inputs(paths: Sequence[str | os.PathLike[str]]) -> Iterator[tuple[str, str]]:
    """(kind, path) of each input file; folders give their databases and logs.

    The kind is "database", "json", "log" (named), or, of a folder (`folder_inputs`),
    FOLDER_DATABASE and "found log".
    """
    for raw in paths:
        path = os.fspath(raw)
        refuse_unsupported_url(path)
        if is_store_url(path):
            yield "database", path
        elif os.path.isdir(path):
            databases, logs = folder_inputs(path)
            if not logs and not databases:
                raise ResultsError(
                    f"no *{LOG_SUFFIX} files under {path}",
                    hint="name log files, folders that hold them, or a results database",
                )
            for database in databases:
                yield FOLDER_DATABASE, database
            for log in logs:
                yield "found log", log
        elif os.path.lexists(path) and not _is_regular(path):
            raise ResultsError(f"cannot read {path}: not a regular file",
                               hint="name log files, folders, results databases or JSON files")
        elif os.path.isfile(path):
            if is_store(path):
                yield "database", path
            elif path.lower().endswith(DATABASE_SUFFIXES):
                # What `dlbs run` says of such a file, rather than "no results in a log".
                raise ResultsError(f"results database {path}: cannot open: file is not a "
                                   "database" + (" (it is empty)" if os.path.getsize(path) == 0
                                                 else ""))
            elif path.endswith(".json"):
                yield "json", path
            else:
                yield "log", path
        else:
            raise ResultsError(f"no such log, folder or results database: {path}")


def with_engine_values(values: dict[str, Any], detail: Detail) -> Record:
    """A record of one experiment's flat values (a log's, parse output's), the engine applied.

    With summaries, `results.*` number series are dropped (parameters are kept whole: a list
    parameter can tell experiments apart). `env.<name>` keys (parse output of a database's
    attempts) are the record's environment, as a database's are.
    """
    computed = summarize(values, values)
    if detail.summaries:
        experiment = {key: value for key, value in values.items()
                      if not key.startswith("results.") or is_summary_value(value)}
        experiment.update(computed)
    else:
        experiment = dict(values)
        experiment.update(computed)
    samples = stats.finite_samples(values.get(stats.SAMPLES_KEY)) if detail.samples else None
    environment = {key[len(ENV_PREFIX):]: value for key, value in values.items()
                   if key.startswith(ENV_PREFIX)}
    return Record(experiment, "", 0.0, environment, samples)


def _load_log(path: str, loaded: Loaded, detail: Detail, recorded: RecordedStatuses,
              named: bool) -> None:
    """Read one log; `named`: the user named it (not found in a folder)."""
    parsed = parse_log(path)
    loaded.logs_read += 1
    loaded.unparsable_lines += parsed.unparsable
    loaded.too_long_lines += parsed.too_long
    loaded.cut_lines += parsed.cut
    if not parsed.values:
        if named:  # not a log at all: saying "no ok experiments" would hide the mistake
            raise ResultsError(f"{path} holds no protocol line (__key__=value): it is not a "
                               f"log of a benchmark",
                               hint="name logs that dlbs run or DLBS wrote, folders that hold "
                                    "them, or a results database")
        loaded.ignored_files.append(path)
        return
    experiment = experiment_from_log(parsed)
    for key in parsed.output()[1]:
        loaded.refused_keys[key] = loaded.refused_keys.get(key, 0) + 1
    recorded.apply(path, experiment)
    record = with_engine_values(experiment, detail)
    recency = _ended(record.experiment)
    record.source = path
    record.recency = _mtime(path) if recency is None else recency
    loaded.records.append(record)


#: The kinds of `_inputs` that are logs: named, or found in a folder.
LOG_KINDS = ("log", "found log")
#: The kind of `_inputs` of a database found in a folder.
FOLDER_DATABASE = "folder database"
#: The results database that `dlbs run` keeps beside its logs (`exp.log_dir`).
DATABASE_NAME = "results.db"


def folder_databases(folder: str) -> list[str]:
    """The `results.db` of `folder` and of every folder under it, in a stable order."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        if DATABASE_NAME in files and is_store(os.path.join(root, DATABASE_NAME)):
            found.append(os.path.join(root, DATABASE_NAME))
    return found


def folder_inputs(folder: str) -> tuple[list[str], list[str]]:
    """(the databases, the logs none of them knows) of a folder, as the module says.

    The databases are the `results.db` of `folder` and of every folder under it that is an
    SQLite database, in a stable order; the logs, the regular `*.log` files under it whose
    path no database's row names (attempt_files.known_log_paths).
    """
    databases = folder_databases(folder)
    known: set[str] = set()
    for database in databases:
        with open_store(database, read_only=True) as store:
            rows = store.query("read attempts", "SELECT log_path, run_folder FROM attempts "
                                                "WHERE log_path IS NOT NULL")
        known.update(known_log_paths(rows, os.path.dirname(database)))
    logs = [log for log in find_logs(folder)
            if os.path.normpath(os.path.abspath(log)) not in known]
    return databases, logs


class RecordedStatuses:
    """What the results database beside a log says of the attempt that wrote it.

    A log alone cannot tell every end: an attempt that dlbs stopped (Ctrl-C, a timeout, a
    kill -9 of dlbs closed by the next run) may have printed its times, and its log then
    reads as ok. The database of its log folder (`results.db` in the log's folder or a
    folder above it) recorded how it ended: that status wins over the log's, for the log
    the database names (same file name, same experiment). A database that cannot be read
    is passed over: the log's own judgement stands.
    """

    def __init__(self) -> None:
        self._databases: dict[str, dict[str, tuple[str, str, str | None]] | None] = {}

    def apply(self, log: str, experiment: dict[str, Any]) -> None:
        """Set the recorded status (and its message) on the experiment read from `log`."""
        name = os.path.basename(log)
        folder = os.path.dirname(os.path.abspath(log))
        while True:
            found = self._statuses(os.path.join(folder, DATABASE_NAME)).get(name)
            if found is not None:
                exp_id, status, message = found
                if exp_id == experiment.get("exp.id") and \
                        status != experiment.get("results.status"):
                    experiment["results.status"] = status
                    experiment["results.status_msg"] = message or \
                        f"the results database recorded the attempt as {status}"
                return
            parent = os.path.dirname(folder)
            if parent == folder:
                return
            folder = parent

    def _statuses(self, database: str) -> dict[str, tuple[str, str, str | None]]:
        """Log file name -> (exp_id, status, message) of every ended attempt of `database`."""
        if database not in self._databases:
            self._databases[database] = None
            if is_store(database):
                try:
                    with open_store(database, read_only=True) as store:
                        self._databases[database] = store.log_statuses()
                except ResultsError:
                    pass
        return self._databases[database] or {}


def _load_database(location: str, loaded: Loaded, detail: Detail) -> None:
    path = store_name(location)   # a URL without its password: where the records came from
    with open_store(location, read_only=True) as store:
        if not detail.summaries:
            for attempt in (store.attempts() if detail.all_attempts else
                            store.attempts(latest_only=True)):
                experiment = attempt.as_experiment()
                loaded.records.append(Record(experiment, path, _ended(experiment) or 0.0,
                                             attempt.environment))
            return
        for stored in store.summaries(latest_only=not detail.all_attempts,
                                      with_samples=detail.samples):
            recency = epoch(stored.ended_at or stored.started_at) or 0.0
            loaded.records.append(Record(stored.experiment, path, recency,
                                         stored.environment, stored.samples))


def _load_json(path: str, loaded: Loaded, detail: Detail) -> None:
    try:
        with open(path, "rb") as stream:
            document = orjson.loads(stream.read())
    except OSError as error:
        raise ResultsError(f"cannot read {path}: {error.strerror or error}") from error
    except orjson.JSONDecodeError as error:
        raise ResultsError(f"{path} is not valid JSON: {error}") from error
    for experiment in experiments_from_document(document, path):
        record = with_engine_values(experiment, detail)
        record.source = path
        record.recency = _ended(record.experiment) or 0.0
        loaded.records.append(record)


def experiments_from_document(document: Any, path: str) -> list[dict[str, Any]]:
    """The experiments of a `dlbs parse` JSON document; newer format versions are refused."""
    if not isinstance(document, dict) or document.get("format") != EXPERIMENTS_FORMAT:
        raise ResultsError(
            f"{path} is not a file written by `dlbs parse` (no \"format\": "
            f"\"{EXPERIMENTS_FORMAT}\")"
        )
    version = document.get("version")
    if not isinstance(version, int) or version > EXPERIMENTS_FORMAT_VERSION:
        raise ResultsError(
            f"{path} has format version {version!r}; this dlbs reads versions up to "
            f"{EXPERIMENTS_FORMAT_VERSION}",
            hint="use a newer dlbs to read it",
        )
    experiments = document.get("experiments")
    if not isinstance(experiments, list) or not all(isinstance(e, dict) for e in experiments):
        raise ResultsError(f"{path}: \"experiments\" must be a list of objects")
    return experiments


def experiments_document(experiments: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The JSON document `dlbs parse` writes for `experiments`."""
    return {
        "format": EXPERIMENTS_FORMAT,
        "version": EXPERIMENTS_FORMAT_VERSION,
        "experiments": list(experiments),
    }


def latest_per_id(records: Iterable[Record]) -> tuple[list[Record], int]:
    """Keep the most recent record of each `exp.id` (records without one are all kept).

    Ties go to the record read later. Returns the kept records, in first-seen order, and
    how many older ones were dropped.
    """
    kept: dict[Any, Record] = {}
    dropped = 0
    for index, record in enumerate(records):
        exp_id = record.experiment.get("exp.id")
        key = ("id", str(exp_id)) if exp_id not in (None, "") else ("record", index)
        previous = kept.get(key)
        if previous is not None:
            dropped += 1
            if record.recency < previous.recency:
                continue
        kept[key] = record
    return list(kept.values()), dropped


def _ended(experiment: dict[str, Any]) -> float | None:
    for key in ("results.end_time", "results.start_time"):
        value = experiment.get(key)
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value).timestamp()
            except ValueError:
                continue
    return None


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
