"""Reading attempts: whole rows (resume, `dlbs parse`, copying), summaries, report columns.

Resume reads statuses and open attempts; `dlbs parse` and `dlbs results copy` read whole
attempts; reports read summaries, or the two small BLOBs per attempt that the columnar reader
(stored_columns.py) turns into arrays, and then only what they show. Attempts are found by
`rowid` (SQLite's own; a column of that name in PostgreSQL), which never changes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from dlbs.results import stats
from dlbs.results.attempt import (
    STARTED,
    Attempt,
    ReportColumns,
    StoredSummary,
    flatten,
)
from dlbs.results.row_shape import checked_row
from dlbs.results.store_base import SqlStore
from dlbs.util.gc import no_cyclic_gc

_COLUMN_NAMES = ("exp_id", "attempt", "status", "status_msg", "params", "results", "log_path",
                 "environment", "job_id", "started_at", "ended_at", "summary", "run_tag",
                 "run_host", "run_folder")
_COLUMNS = ", ".join(_COLUMN_NAMES)
# The attempts' own columns that the columnar reader reads alone, when a report asks.
_TEXT_COLUMNS = ("status_msg", "log_path", "started_at", "ended_at", "stats_warnings",
                 "run_tag", "run_host", "run_folder")
# Rows asked for by rowid at once (SQLite allows 32766 parameters; fewer keep it quick).
_ROWID_CHUNK = 500
# The newest attempt of each experiment (as the `experiments` view), for any condition.
_LATEST = ("SELECT a.exp_id, a.status, a.run_folder FROM attempts AS a JOIN (SELECT exp_id, "
           "MAX(attempt) AS newest FROM attempts {where} GROUP BY exp_id) AS b "
           "ON a.exp_id = b.exp_id AND a.attempt = b.newest")


class StoreReads(SqlStore):
    """The reads of a results store (see the module)."""

    def _contains(self, column: str) -> str:
        """SQL that is true where the text `column` holds the parameter's text."""
        raise NotImplementedError

    def pending_jobs(self) -> list[Attempt]:
        """Open attempts that have a job id: scheduler jobs to re-attach to (of the claim)."""
        scope, parameters = self._open_scope()
        return self._select(f"WHERE ended_at IS NULL AND job_id IS NOT NULL{scope}",
                            tuple(parameters))

    def unfinished(self) -> list[Attempt]:
        """Open attempts without a job id: cut off by an interrupt or a crash (of the claim)."""
        scope, parameters = self._open_scope()
        return self._select(f"WHERE ended_at IS NULL AND job_id IS NULL{scope}",
                            tuple(parameters))

    def latest_attempt(self, exp_id: str) -> Attempt | None:
        """The newest attempt of `exp_id`, or None when it was never recorded."""
        found = self._select("WHERE exp_id = ? ORDER BY attempt DESC LIMIT 1", (exp_id,))
        return found[0] if found else None

    def latest_status(self, exp_id: str) -> str | None:
        """Status of the newest attempt: None if never recorded, STARTED if it never ended."""
        rows = self._read("read attempts", "SELECT status FROM attempts WHERE exp_id = ? "
                          "ORDER BY attempt DESC LIMIT 1", (exp_id,))
        if not rows:
            return None
        return rows[0][0] or STARTED

    def latest_statuses(self, run_tag: str | None = None,
                        run_host: str | None = None) -> dict[str, str]:
        """`latest_status` of every recorded experiment, in one query (for large sweeps).

        With `run_tag`, of the attempts that runs on `run_host` recorded under that tag
        (resuming per tag: docs/results.md).
        """
        return {exp_id: status for exp_id, (status, _) in
                self.latest_places(run_tag, run_host).items()}

    def latest_places(self, run_tag: str | None = None,
                      run_host: str | None = None) -> dict[str, tuple[str, str | None]]:
        """`latest_statuses`, each with the log folder of the run that recorded it."""
        if run_tag is None:
            rows = self._read("read attempts", _LATEST.format(where=""))
        else:
            condition = "WHERE run_tag = ? AND run_host = ?"
            rows = self._read("read attempts",
                              _LATEST.format(where=condition) + " AND a.run_tag = ? AND "
                              "a.run_host = ?", (run_tag, run_host) * 2)
        return {exp_id: (status or STARTED, folder) for exp_id, status, folder in rows}

    def attempts(self, exp_id: str | None = None, latest_only: bool = False) -> list[Attempt]:
        """Stored attempts, oldest first; of one experiment, or the newest of each."""
        table = "experiments" if latest_only else "attempts"
        if exp_id is None:
            return self._select("ORDER BY started_at, exp_id, attempt", table=table)
        return self._select("WHERE exp_id = ? ORDER BY attempt", (exp_id,), table=table)

    def iter_attempts(self, ended_only: bool = True, chunk: int = 2000) -> Iterator[Attempt]:
        """Every attempt in rowid order, a chunk at a time (copying a large database)."""
        last = None
        condition = "ended_at IS NOT NULL AND " if ended_only else ""
        while True:
            rows = self._read("read attempts", f"SELECT rowid, {_COLUMNS} FROM attempts "
                              f"WHERE {condition}rowid > ? ORDER BY rowid LIMIT {int(chunk)}",
                              (-1 if last is None else last,))
            if not rows:
                return
            for row in rows:
                yield self._attempt_from_row(row[1:])
            last = rows[-1][0]

    def runs(self) -> list[tuple[Any, ...]]:
        """Every run that recorded attempts, newest first.

        (run_tag, run_host, run_folder, attempts, ok attempts, first start, last end);
        attempts recorded before schema version 4 come as one run of NULLs.
        """
        return [tuple(row) for row in self._read(
            "read runs", "SELECT run_tag, run_host, run_folder, count(*), "
            "sum(CASE WHEN status = 'ok' THEN 1 ELSE 0 END), min(started_at), max(ended_at) "
            "FROM attempts GROUP BY run_tag, run_host, run_folder ORDER BY min(started_at) DESC")]

    def change_marker(self) -> tuple[Any, ...]:
        """What changes whenever an attempt is added or ends (readers that cache compare it).

        (the newest rowid, the number of open attempts): a new attempt takes a higher rowid
        (writers take turns, so rowids are given in commit order), and one that ends leaves
        the open ones. Two index reads (the rowid's, `attempts_open`), not a table scan: a
        page of `dlbs serve` asks before each answer.
        """
        return tuple(self._read("read attempts", "SELECT (SELECT max(rowid) FROM attempts), "
                                "(SELECT count(*) FROM attempts WHERE ended_at IS NULL)")[0])

    def attempt_keys(self) -> list[tuple[int, str, int, str]]:
        """(rowid, exp_id, attempt, started_at) of every attempt (what copying compares)."""
        rows = self._read("read attempts",
                          "SELECT rowid, exp_id, attempt, started_at FROM attempts")
        for _, exp_id, attempt, started_at in rows:
            checked_row(self.location, {"exp_id": exp_id, "attempt": attempt,
                                        "started_at": started_at})
        return [tuple(row) for row in rows]

    def experiments(self) -> Iterator[dict[str, Any]]:
        """The newest attempt of every experiment as a flat dict (see Attempt.as_experiment)."""
        for attempt in self.attempts(latest_only=True):
            yield attempt.as_experiment()

    def summaries(self, latest_only: bool = False, with_samples: bool = False,
                  ended_only: bool = False,
                  rowids: Sequence[int] | None = None) -> list[StoredSummary]:
        """Attempts as flat experiments from their summaries, without the raw results.

        The summary gives the results (no number series is parsed); with `with_samples`, the
        per-batch times come along as a float64 array (None when the attempt has none).
        `rowids` reads those rows only (what `report_columns` numbered). In no particular
        order: callers order attempts by time.
        """
        table = "experiments" if latest_only else "attempts"
        blob = "time_data" if with_samples else "NULL"
        where = "WHERE ended_at IS NOT NULL " if ended_only else ""
        query = (f"SELECT exp_id, attempt, status, status_msg, params, log_path, environment, "
                 f"started_at, ended_at, summary, {blob}, rowid FROM {table} ")
        if rowids is None:
            rows = self._read("read attempts", query + where, binary=with_samples)
        else:
            rows = []
            for chunk in _chunks(rowids):
                rows.extend(self._read("read attempts", query + f"WHERE rowid IN "
                                       f"({', '.join('?' * len(chunk))})", chunk,
                                       binary=with_samples))
        environments: dict[str | None, dict[str, Any]] = {}
        found = []
        with no_cyclic_gc():
            for (exp_id, attempt, status, status_msg, params, log_path, environment_text,
                 started_at, ended_at, summary, blob, rowid) in rows:
                row = checked_row(self.location, {
                    "exp_id": exp_id, "attempt": attempt, "status": status,
                    "status_msg": status_msg, "log_path": log_path, "started_at": started_at,
                    "ended_at": ended_at, "params": params, "summary": summary})
                environment = environments.get(environment_text)
                if environment is None:
                    environment = environments[environment_text] = checked_row(
                        self.location, {"exp_id": exp_id, "attempt": attempt,
                                        "environment": environment_text})["environment"]
                experiment = flatten(row["params"], row["summary"], exp_id, attempt, status,
                                     status_msg, log_path, started_at, ended_at, environment)
                found.append(StoredSummary(experiment, environment,
                                           stats.unpack_samples(_bytes(blob)), started_at,
                                           ended_at, rowid))
        return found

    # -- what the columnar reader (stored_columns.py) reads ---------------------------------

    def report_columns(self) -> ReportColumns:
        """Every attempt's `report_row` and `param_codes`, in rowid order (see ReportColumns).

        A report row of the wrong size (a row dlbs did not write) is left for the reader to
        find: the rows then do not divide into attempts.
        """
        return ReportColumns.of_rows(self._read(
            "read attempts", "SELECT rowid, report_row, param_codes FROM attempts "
            "ORDER BY rowid", binary=True))

    def view_keys(self) -> dict[int, str]:
        """Key id -> key of every key of a view (view_codes.py)."""
        return dict(self._read("read parameter keys", "SELECT id, key FROM param_keys"))

    def view_bases(self) -> dict[int, bytes]:
        """Base id -> its packed codes."""
        return {base: _bytes(codes) for base, codes in self._read(
            "read parameter bases", "SELECT id, codes FROM param_bases", binary=True)}

    def view_values(self, key_id: int) -> list[tuple[int, str]]:
        """(value number, canonical JSON) of every stored value of one key."""
        return [tuple(row) for row in self._read(  # type: ignore[misc]
            "read parameter values", "SELECT number, value FROM param_values "
            "WHERE key_id = ?", (key_id,))]

    def view_values_of(self, key_ids: Sequence[int]) -> list[tuple[int, int, str]]:
        """(key id, value number, canonical JSON) of every stored value of some keys."""
        found: list[tuple[int, int, str]] = []
        for chunk in _chunks(key_ids):
            found.extend(tuple(row) for row in self._read(  # type: ignore[misc]
                "read parameter values", "SELECT key_id, number, value FROM param_values "
                f"WHERE key_id IN ({', '.join('?' * len(chunk))})", chunk))
        return found

    def view_value_number(self, key_id: int, text: str) -> int | None:
        """The number of one stored value of a key (canonical JSON), None when not stored."""
        rows = self._read("read parameter values", "SELECT number FROM param_values "
                          "WHERE key_id = ? AND value = ?", (key_id, text))
        return None if not rows else int(rows[0][0])

    def log_statuses(self) -> dict[str, tuple[str, str, str | None]]:
        """Log file name -> (exp_id, status, status message) of every attempt that ended."""
        rows = self.query("read attempts",
                          "SELECT log_path, exp_id, status, status_msg, attempt FROM attempts "
                          "WHERE status IS NOT NULL AND log_path IS NOT NULL")
        for log_path, exp_id, status, message, attempt in rows:
            checked_row(self.location, {"log_path": log_path, "exp_id": exp_id,
                                        "status": status, "status_msg": message,
                                        "attempt": attempt})
        return {os.path.basename(log_path): (exp_id, status, message)
                for log_path, exp_id, status, message, _ in rows}

    def text_column(self, name: str) -> list[tuple[int, Any]]:
        """(rowid, value) of one of the attempts' own columns, for every attempt."""
        if name not in _TEXT_COLUMNS:
            raise ValueError(f"not a column to read alone: {name}")
        return [tuple(row) for row in self._read(  # type: ignore[misc]
            "read attempts", f"SELECT rowid, {name} FROM attempts WHERE {name} IS NOT NULL")]

    def summary_texts(self, containing: str) -> list[tuple[int, str]]:
        """(rowid, summary JSON) of the attempts whose summary holds the text `containing`."""
        return [tuple(row) for row in self._read(  # type: ignore[misc]
            "read attempts", f"SELECT rowid, summary FROM attempts WHERE "
            f"{self._contains('summary')}", (containing,))]

    def summary_values(self, key: str) -> list[tuple[int, str]] | None:
        """(rowid, the JSON text of summary[key]) of the attempts whose summary has `key`.

        None where the database cannot pick the value out: read `summary_texts` instead.
        """
        return None

    def samples_of(self, rowids: Sequence[int]) -> dict[int, np.ndarray | None]:
        """Per-batch times by rowid (None for an attempt that has none)."""
        found: dict[int, np.ndarray | None] = {}
        for chunk in _chunks(rowids):
            found.update((rowid, stats.unpack_samples(_bytes(blob))) for rowid, blob in
                         self._read("read attempts", "SELECT rowid, time_data FROM attempts "
                                    f"WHERE rowid IN ({', '.join('?' * len(chunk))})", chunk,
                                    binary=True))
        return found

    def _select(
        self, where: str, parameters: tuple[Any, ...] = (), table: str = "attempts"
    ) -> list[Attempt]:
        rows = self._read("read attempts", f"SELECT {_COLUMNS} FROM {table} {where}",
                          parameters)
        return [self._attempt_from_row(row) for row in rows]

    def _attempt_from_row(self, row: Sequence[Any]) -> Attempt:
        """An Attempt of a row of _COLUMNS, its shape checked (row_shape.py)."""
        return Attempt(**checked_row(self.location, dict(zip(_COLUMN_NAMES, row))))


def _bytes(blob: Any) -> Any:
    """A BLOB as bytes (psycopg gives a memoryview in binary results)."""
    return bytes(blob) if isinstance(blob, memoryview) else blob


def _chunks(items: Sequence[int]) -> Iterator[list[int]]:
    items = list(items)
    for start in range(0, len(items), _ROWID_CHUNK):
        yield items[start:start + _ROWID_CHUNK]
