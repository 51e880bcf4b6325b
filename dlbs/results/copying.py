"""Moving results between stores: `dlbs results copy SRC DST`, any direction, idempotent.

A source is a results store (an SQLite file or a `postgresql://` URL) or a folder, read as
`dlbs report` and `dlbs parse` read it (sources.folder_inputs): the `results.db` of it and
its subfolders, whole rows (environment, device models, monitor series and energy, the run's
tag, host and folder), then the logs no database knows, each one attempt (judged as `dlbs
parse` judges it: the verdict dlbs appended to it, else what it printed). A destination is a
store, or a folder (its `results.db`). Every ended attempt of the source that the
destination does not hold yet is recorded there, in the source's order, with the next free
attempt number of its experiment; attempts still open (running, or cut off) stay behind.

An attempt is the same in both places when its experiment and
- its end are: the backend's `results.end_time` (which the log and the database keep);
- or, without one (skipped, failed before the backend wrote anything, killed), its start
  as the store recorded it, which a log of dlbs carries in its verdict;
- or, for a log that has neither (DLBS's, written by hand, cut off before dlbs could write a
  verdict), its content: the digest of its parameters, results, status and message
  (`content_key`), so distinct attempts of one experiment stay distinct.
So copying twice adds nothing, copying back adds nothing, copying a folder into its own
store adds nothing, and a log folder whose logs are partly recorded already (a run that lost
its database mid-run) adds only the rest.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dlbs.errors import ResultsError
from dlbs.results.attempt import Attempt
from dlbs.results.attempt_files import resolve_log_path
from dlbs.results.protocol import experiment_from_log, parse_log
from dlbs.results.row_shape import checked_row
from dlbs.results.sources import folder_inputs
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
# Rows whose content is read at once (what copying compares of attempts without an end).
_CONTENT_CHUNK = 500
# The keys of a log's experiment that are the attempt's own columns, not its results.
_OWN_KEYS = ("results.status", "results.status_msg", "results.log_file", "results.attempt")

Key = tuple[str, str, str]


@dataclass
class Copied:
    """What a copy did."""

    copied: int = 0
    already_there: int = 0
    open_left: int = 0          # attempts of a store that have not ended
    logs_without_id: int = 0    # logs that name no exp.id (DLBS's): nothing to key them by
    source: str = ""
    destination: str = ""
    #: Keys that the logs' benchmarks printed and that were not taken (protocol.py).
    refused_keys: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        """One line for the user."""
        parts = [f"copied {self.copied} attempt(s) from {self.source} to {self.destination}",
                 f"{self.already_there} already there"]
        if self.open_left:
            parts.append(f"{self.open_left} not ended (left behind)")
        if self.logs_without_id:
            parts.append(f"{self.logs_without_id} log(s) without exp.id (left behind)")
        if self.refused_keys:
            parts.append(f"{max(self.refused_keys.values())} log(s) printed "
                         f"{', '.join(sorted(self.refused_keys))}, which a benchmark does not "
                         "set: not taken")
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
        databases, logs = [source], []
    elif os.path.isdir(source):
        databases, logs = folder_inputs(source)
        if not databases and not logs:
            raise ResultsError(f"no *.log files under {source}")
    else:
        raise ResultsError(f"{source} is neither a results database nor a folder of logs",
                           hint="copy a folder of logs, an SQLite results database or a "
                                "postgresql:// URL")
    with open_store(target) as writer:
        _copy(_attempts(databases, logs, done), writer, done)
    return done


def _attempts(databases: list[str], logs: list[str], done: Copied) -> Iterator[Attempt]:
    """The ended attempts of the databases, in their order, then those of the logs."""
    for database in databases:
        with open_store(database, read_only=True) as reader:
            yield from reader.iter_attempts()
            done.open_left += len(reader.text_column("started_at")) - \
                len(reader.text_column("ended_at"))
    yield from _attempts_of_logs(logs, done)


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
        started = item.started_at or _modified(item.log_path)
        pending.append(Attempt(
            item.exp_id, numbers[item.exp_id], item.status, item.status_msg, item.params,
            item.results, resolve_log_path(item.log_path, item.run_folder) or item.log_path,
            item.environment, None, started, item.ended_at or started, run_tag=item.run_tag,
            run_host=item.run_host, run_folder=item.run_folder))
        if len(pending) >= _CHUNK:
            done.copied += writer.record_attempts(pending)
            pending = []
    if pending:
        done.copied += writer.record_attempts(pending)


def fingerprint(item: Attempt) -> Key:
    """What makes two stored attempts one (see the module)."""
    end = item.results.get(END_KEY) if isinstance(item.results, dict) else None
    if isinstance(end, str) and end:
        return (item.exp_id, "end", end)
    if item.started_at is None:   # a log without a verdict: its content
        return content_key(item.exp_id, item.status, item.status_msg, item.params,
                           item.results)
    return (item.exp_id, "start", str(item.started_at))


def content_key(exp_id: str, status: str | None, status_msg: str | None,
                params: dict[str, Any], results: dict[str, Any]) -> Key:
    """An attempt's key by what it holds: its experiment and the digest of the rest."""
    text = exact_json.dumps([status, status_msg, params, results], sort_keys=True)
    return (exp_id, "content", hashlib.sha256(text.encode()).hexdigest())


def _known(writer: ResultsStore) -> tuple[set[Key], dict[str, int]]:
    """The destination's keys and each experiment's last number.

    Each attempt has every key that `fingerprint` can give it: its end, its start, and,
    without an end, its content.
    """
    ends = {rowid: exact_json.loads(text) for rowid, text in _end_values(writer)}
    known: set[Key] = set()
    numbers: dict[str, int] = {}
    without_end = []
    for rowid, exp_id, attempt, started_at in writer.attempt_keys():
        end = ends.get(rowid)
        if isinstance(end, str) and end:
            known.add((exp_id, "end", end))
        else:
            without_end.append(rowid)
        known.add((exp_id, "start", str(started_at)))
        numbers[exp_id] = max(numbers.get(exp_id, 0), int(attempt))
    known.update(_content_keys(writer, without_end))
    return known, numbers


def _content_keys(writer: ResultsStore, rowids: list[int]) -> Iterator[Key]:
    """`content_key` of the destination's attempts `rowids`, read a chunk at a time."""
    for start in range(0, len(rowids), _CONTENT_CHUNK):
        chunk = rowids[start:start + _CONTENT_CHUNK]
        rows = writer.query("read attempts", "SELECT exp_id, attempt, status, status_msg, "
                            "params, results FROM attempts WHERE rowid IN "
                            f"({', '.join('?' * len(chunk))})", chunk)
        for exp_id, attempt, status, status_msg, params, results in rows:
            row = checked_row(writer.location, {
                "exp_id": exp_id, "attempt": attempt, "status": status,
                "status_msg": status_msg, "params": params, "results": results})
            yield content_key(exp_id, status, status_msg, row["params"], row["results"])


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


def attempt_of_log(path: str, done: Copied) -> Attempt | None:
    """A log as one ended attempt; None when it is no log, or names no exp.id (counted).

    Judged as `dlbs parse` judges it; the status, message, start and end of the verdict dlbs
    appended to it when it has one. Its run folder is where it is now, on this host. Without
    a start the store recorded (no verdict, no `results.start_time`), its `started_at` is
    None: `fingerprint` keys it by its content, and the row takes the log's time.
    """
    parsed = parse_log(path)
    if not parsed.values:
        return None
    experiment = experiment_from_log(parsed)
    for key in parsed.output()[1]:
        done.refused_keys[key] = done.refused_keys.get(key, 0) + 1
    exp_id = experiment.get("exp.id")
    if not isinstance(exp_id, str) or not exp_id:
        done.logs_without_id += 1
        return None
    # Where the log lies is its row's log_path, not part of what it holds: a copy of the
    # same log elsewhere is the same attempt (`content_key`).
    params = {k: v for k, v in experiment.items() if not k.startswith("results.")
              and (k != "exp.log_file" or k in parsed.values)}
    results = {k: v for k, v in experiment.items()
               if k.startswith("results.") and k not in _OWN_KEYS}
    verdict = parsed.verdict or {}
    status_msg = experiment.get("results.status_msg")
    tag = params.get("runtime.run_tag")
    absolute = os.path.abspath(path)
    return Attempt(
        exp_id, 1, str(experiment.get("results.status") or "failure"),
        None if status_msg is None else str(status_msg), params, results, absolute, {},
        None, _text(verdict.get("started_at")) or _text(experiment.get("results.start_time")),
        _text(verdict.get("ended_at")) or _text(experiment.get(END_KEY)),
        run_tag=tag if isinstance(tag, str) and tag else None,
        run_host=socket.gethostname(), run_folder=os.path.dirname(absolute))


def _attempts_of_logs(logs: list[str], done: Copied) -> Iterator[Attempt]:
    """Each log as one ended attempt (`attempt_of_log`)."""
    for path in logs:
        item = attempt_of_log(path, done)
        if item is not None:
            yield item


def _modified(path: str | None) -> str:
    """When a file was last written (now, when it cannot be told), as the store writes times."""
    try:
        when = os.stat(path).st_mtime if path else None
    except OSError:
        when = None
    moment = datetime.now(UTC) if when is None else datetime.fromtimestamp(when, UTC)
    return moment.isoformat(timespec="milliseconds")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _same(source: str, target: str) -> bool:
    if is_store_url(source) or is_store_url(target):
        return source == target
    try:
        return os.path.exists(target) and os.path.samefile(source, target)
    except OSError:
        return False
