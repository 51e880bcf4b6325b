"""Experiments from wherever results are kept.

Log files, log folders, results databases, and the JSON that `dlbs parse` writes.

Each experiment comes back as a `Record` with the place it came from and a recency (when it
ended), so that readers can keep the latest result of each `exp.id`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from dlbs.errors import ResultsError
from dlbs.results.protocol import experiment_from_log, parse_log
from dlbs.results.store import ResultsStore, is_sqlite_file

# The file `dlbs parse -o x.json` writes: {"format": ..., "version": ..., "experiments": [...]}
EXPERIMENTS_FORMAT = "dlbs-experiments"
EXPERIMENTS_FORMAT_VERSION = 1
LOG_SUFFIX = ".log"


@dataclass
class Record:
    """One experiment, where it was read, and when it ended (seconds since the epoch)."""

    experiment: dict[str, Any]
    source: str
    recency: float = 0.0


@dataclass
class Loaded:
    """What `load_experiments` found."""

    records: list[Record] = field(default_factory=list)
    logs_read: int = 0
    # Files that hold no protocol line at all (not logs of ours): named, not fatal.
    ignored_files: list[str] = field(default_factory=list)
    unparsable_lines: int = 0

    @property
    def experiments(self) -> list[dict[str, Any]]:
        """The experiments alone, in the order they were read."""
        return [record.experiment for record in self.records]


def find_logs(folder: str) -> list[str]:
    """Every `*.log` under `folder`, recursively, in a stable order."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        found.extend(os.path.join(root, name) for name in sorted(files)
                     if name.endswith(LOG_SUFFIX))
    return found


def load_experiments(paths: Sequence[str | os.PathLike[str]]) -> Loaded:
    """Read logs, folders (searched for *.log), results databases and `dlbs parse` JSON."""
    loaded = Loaded()
    for raw in paths:
        path = os.fspath(raw)
        if os.path.isdir(path):
            logs = find_logs(path)
            if not logs:
                raise ResultsError(
                    f"no *{LOG_SUFFIX} files under {path}",
                    hint="name log files, folders that hold them, or a results database",
                )
            for log in logs:
                _load_log(log, loaded)
        elif os.path.isfile(path):
            if is_sqlite_file(path):
                _load_database(path, loaded)
            elif path.endswith(".json"):
                _load_json(path, loaded)
            else:
                _load_log(path, loaded)
        else:
            raise ResultsError(f"no such log, folder or results database: {path}")
    return loaded


def _load_log(path: str, loaded: Loaded) -> None:
    parsed = parse_log(path)
    loaded.logs_read += 1
    loaded.unparsable_lines += parsed.unparsable
    if not parsed.values:
        loaded.ignored_files.append(path)
        return
    experiment = experiment_from_log(parsed)
    recency = _ended(experiment)
    if recency is None:
        recency = _mtime(path)
    loaded.records.append(Record(experiment, path, recency))


def _load_database(path: str, loaded: Loaded) -> None:
    with ResultsStore(path, create=False) as store:
        for experiment in store.experiments():
            loaded.records.append(Record(experiment, path, _ended(experiment) or 0.0))


def _load_json(path: str, loaded: Loaded) -> None:
    try:
        with open(path, "rb") as stream:
            document = orjson.loads(stream.read())
    except OSError as error:
        raise ResultsError(f"cannot read {path}: {error.strerror or error}") from error
    except orjson.JSONDecodeError as error:
        raise ResultsError(f"{path} is not valid JSON: {error}") from error
    for experiment in experiments_from_document(document, path):
        loaded.records.append(Record(experiment, path, _ended(experiment) or 0.0))


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
