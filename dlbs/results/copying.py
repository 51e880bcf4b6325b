"""Moving results between stores: `dlbs results copy SRC DST`, any direction, idempotent.

A source is a results store (an SQLite file or a `postgresql://` URL) or a folder of logs
(each log one attempt, judged as `dlbs parse` judges it); a destination is a store, or a
folder (its `results.db`). Every ended attempt of the source that the destination does not
hold yet is recorded there, in the source's order, with the next free attempt number of
its experiment; attempts still open (running, or cut off) stay behind.

An attempt is the same in both places when its experiment and its end are: the backend's
`results.end_time` (which the log and the database both keep), or, for an attempt without
one (skipped, failed before the backend wrote anything), when it started. So copying twice
adds nothing, copying back adds nothing, and a log folder whose logs are partly recorded
already (a run that lost its database mid-run) adds only the rest.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dlbs.errors import ResultsError
from dlbs.results.attempt import Attempt
from dlbs.results.protocol import experiment_from_log, parse_log
from dlbs.results.sources import find_logs
from dlbs.results.store import (
    ResultsStore,
    is_store,
    is_store_url,
    open_store,
    refuse_unsupported_url,
    store_name,
)
from dlbs.util import exact_json
from dlbs.util.regular_files import special_kind

END_KEY = "results.end_time"
DEFAULT_NAME = "results.db"
# Attempts written per transaction: a copy that fails midway keeps what it wrote, and the
# next copy adds the rest.
_CHUNK = 2000


@dataclass
class Copied:
    """What a copy did."""

    copied: int = 0
    already_there: int = 0
    open_left: int = 0          # attempts of a store that have not ended
    logs_without_id: int = 0    # logs that name no exp.id (DLBS's): nothing to key them by
    source: str = ""
    destination: str = ""

    def line(self) -> str:
        """One line for the user."""
        parts = [f"copied {self.copied} attempt(s) from {self.source} to {self.destination}",
                 f"{self.already_there} already there"]
        if self.open_left:
            parts.append(f"{self.open_left} not ended (left behind)")
        if self.logs_without_id:
            parts.append(f"{self.logs_without_id} log(s) without exp.id (left behind)")
        return "; ".join(parts)


def destination_location(destination: str) -> str:
    """A destination as a store location: a folder means its `results.db`."""
    if not is_store_url(destination) and (os.path.isdir(destination) or
                                          destination.endswith(os.sep)):
        return os.path.join(destination, DEFAULT_NAME)
    return destination


def copy_results(source: str, destination: str) -> Copied:
    """Copy every ended attempt of `source` that `destination` lacks (see the module)."""
    refuse_unsupported_url(source)
    refuse_unsupported_url(destination)
    target = destination_location(destination)
    if not is_store_url(source) and not os.path.exists(source):
        raise ResultsError(f"no such results database or log folder: {source}")
    kind = None if is_store_url(source) else special_kind(source)
    if kind is not None:   # read as the other readers would: refused at once, never waited on
        raise ResultsError(f"cannot read {source}: it is {kind}, not a regular file",
                           hint="copy a folder of logs, an SQLite results database or a "
                                "postgresql:// URL")
    if _same(source, target):
        raise ResultsError(f"{store_name(source)} is both the source and the destination")
    done = Copied(source=store_name(source), destination=store_name(target))
    if is_store(source):
        with open_store(source, read_only=True) as reader:
            with open_store(target) as writer:
                _copy(reader.iter_attempts(), writer, done)
            done.open_left = len(reader.text_column("started_at")) - \
                len(reader.text_column("ended_at"))
        return done
    if not os.path.isdir(source):
        raise ResultsError(f"{source} is neither a results database nor a folder of logs",
                           hint="copy a folder of logs, an SQLite results database or a "
                                "postgresql:// URL")
    logs = find_logs(source)
    if not logs:
        raise ResultsError(f"no *.log files under {source}")
    with open_store(target) as writer:
        _copy(_attempts_of_logs(logs, done), writer, done)
    return done


def _copy(attempts: Iterator[Attempt], writer: ResultsStore, done: Copied) -> None:
    """Record what `writer` lacks, in chunks."""
    known, numbers = _known(writer)
    pending: list[Attempt] = []
    for item in attempts:
        key = fingerprint(item)
        if key in known:
            done.already_there += 1
            continue
        known.add(key)
        numbers[item.exp_id] = numbers.get(item.exp_id, 0) + 1
        pending.append(Attempt(
            item.exp_id, numbers[item.exp_id], item.status, item.status_msg, item.params,
            item.results, item.log_path, item.environment, None, item.started_at,
            item.ended_at, run_tag=item.run_tag, run_host=item.run_host,
            run_folder=item.run_folder))
        if len(pending) >= _CHUNK:
            done.copied += writer.record_attempts(pending)
            pending = []
    if pending:
        done.copied += writer.record_attempts(pending)


def fingerprint(item: Attempt) -> tuple[str, str, str]:
    """What makes two stored attempts one (see the module)."""
    end = item.results.get(END_KEY) if isinstance(item.results, dict) else None
    if isinstance(end, str) and end:
        return (item.exp_id, "end", end)
    return (item.exp_id, "start", str(item.started_at))


def _known(writer: ResultsStore) -> tuple[set[tuple[str, str, str]], dict[str, int]]:
    """The fingerprints of the destination's attempts, and each experiment's last number."""
    ends = {rowid: exact_json.loads(text) for rowid, text in _end_values(writer)}
    known: set[tuple[str, str, str]] = set()
    numbers: dict[str, int] = {}
    for rowid, exp_id, attempt, started_at in writer.attempt_keys():
        end = ends.get(rowid)
        known.add((exp_id, "end", end) if isinstance(end, str) and end else
                  (exp_id, "start", str(started_at)))
        numbers[exp_id] = max(numbers.get(exp_id, 0), int(attempt))
    return known, numbers


def _end_values(writer: ResultsStore) -> list[tuple[int, str]]:
    picked = writer.summary_values(END_KEY)
    if picked is not None:
        return picked
    found = []
    for rowid, text in writer.summary_texts(exact_json.dumps(END_KEY)):
        summary = exact_json.loads(text)
        if isinstance(summary, dict) and END_KEY in summary:
            found.append((rowid, exact_json.dumps(summary[END_KEY])))
    return found


def _attempts_of_logs(logs: list[str], done: Copied) -> Iterator[Attempt]:
    """Each log as one ended attempt, judged as `dlbs parse` judges it."""
    for path in logs:
        parsed = parse_log(path)
        if not parsed.values:
            continue
        experiment = experiment_from_log(parsed)
        exp_id = experiment.get("exp.id")
        if not isinstance(exp_id, str) or not exp_id:
            done.logs_without_id += 1
            continue
        params = {k: v for k, v in experiment.items() if not k.startswith("results.")}
        results = {k: v for k, v in experiment.items() if k.startswith("results.")
                   and k not in ("results.status", "results.status_msg", "results.log_file")}
        when = _when(experiment, path)
        status_msg = experiment.get("results.status_msg")
        yield Attempt(exp_id, 1, str(experiment.get("results.status") or "failure"),
                      None if status_msg is None else str(status_msg), params, results,
                      path, {}, None, _text(experiment.get("results.start_time")) or when,
                      _text(experiment.get(END_KEY)) or when)


def _when(experiment: dict[str, Any], path: str) -> str:
    try:
        return datetime.fromtimestamp(os.stat(path).st_mtime, UTC).isoformat(
            timespec="milliseconds")
    except OSError:
        return datetime.now(UTC).isoformat(timespec="milliseconds")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _same(source: str, target: str) -> bool:
    if is_store_url(source) or is_store_url(target):
        return source == target
    try:
        return os.path.exists(target) and os.path.samefile(source, target)
    except OSError:
        return False
