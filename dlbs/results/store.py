"""The results store: every attempt of every experiment in one SQLite database.

One row per attempt. `record_start` writes the row before the backend runs, `record_end`
completes it; a row that was started but never ended is an attempt cut off by a crash of
`dlbs` (or a SLURM job still to re-attach, when it has a job id). Each write is one
transaction, the database runs in WAL mode, so a `kill -9` at any moment leaves every
committed attempt intact and nothing half-written.

When an attempt ends, its summary is computed once (summary.py: the statistics engine's
batch-time statistics, the monitor's summaries, the scalar results) and kept beside the raw
results, with the per-batch times packed as a BLOB: reports read these columns and never
parse the raw results.

The schema carries a version (`PRAGMA user_version`) and an application id: a newer
database is refused, an older one is migrated in one transaction, a foreign SQLite file is
refused. The layout is documented in docs/results.md.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import numpy as np

from dlbs.errors import ResultsError
from dlbs.results import stats
from dlbs.results.migrations import MIGRATIONS
from dlbs.results.protocol import STATUSES
from dlbs.results.schema import (
    APPLICATION_ID,
    SCHEMA,
    SCHEMA_VERSION,
    SUMMARY_NAMES,
    VIEW_NAMES,
    dumps,
    report_row,
    summary_row,
)
from dlbs.results.view_codes import ViewCoder, view_of
from dlbs.util import exact_json
from dlbs.util.gc import no_cyclic_gc

# What `latest_status` says about an attempt that began and never ended.
STARTED = "started"

_BUSY_TIMEOUT_S = 30.0

_COLUMNS = (
    "exp_id, attempt, status, status_msg, params, results, log_path, environment, job_id, "
    "started_at, ended_at, summary"
)
_INSERTED = (*_COLUMNS.split(", ")[:-1], *SUMMARY_NAMES, *VIEW_NAMES)
_INSERT_COLUMNS = ", ".join(_INSERTED)
_INSERT_VALUES = ", ".join("?" * len(_INSERTED))
_END_ASSIGNMENTS = ", ".join(f"{name} = ?" for name in (*SUMMARY_NAMES, *VIEW_NAMES))
# The attempts' own columns that the columnar reader reads alone, when a report asks.
_TEXT_COLUMNS = ("status_msg", "log_path", "started_at", "ended_at", "stats_warnings")
# Rows asked for by rowid at once (SQLite allows 32766 parameters; fewer keep it quick).
_ROWID_CHUNK = 500


def utc_now() -> str:
    """Current time as ISO-8601 UTC with milliseconds (sorts as text)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _timestamp(value: datetime | str | None) -> str:
    if value is None:
        return utc_now()
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.astimezone()
        return value.astimezone(UTC).isoformat(timespec="milliseconds")
    return value


def _dumps(value: Any) -> str:
    # default=str: a parameter of an odd type is kept as its text instead of losing the row.
    return dumps(value)


def _loads(text: str | None) -> Any:
    return {} if text is None else exact_json.loads(text)


@dataclass(frozen=True)
class Attempt:
    """One attempt of one experiment as stored."""

    exp_id: str
    attempt: int
    status: str | None
    status_msg: str | None
    params: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    log_path: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    job_id: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    # What summary.py computed from `results` when the attempt ended ({} before that).
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        """Whether the attempt was completed (with any status)."""
        return self.ended_at is not None

    def as_experiment(self) -> dict[str, Any]:
        """The attempt as a flat experiment dict, as `dlbs parse` gives one from a log.

        The stored status wins over a `results.status` the backend printed (the engine
        may have judged a timeout); an attempt that never ended reads as `started`. The
        summary's statistics win over the backend's values of the same keys.
        """
        experiment = dict(self.params)
        experiment.update(self.results)
        return _flatten(experiment, self.summary, self.exp_id, self.attempt, self.status,
                        self.status_msg, self.log_path, self.started_at, self.ended_at)


def _flatten(experiment: dict[str, Any], summary: Mapping[str, Any], exp_id: str,
             attempt: int, status: str | None, status_msg: str | None, log_path: str | None,
             started_at: str | None, ended_at: str | None) -> dict[str, Any]:
    """`experiment` (parameters and results) completed as `Attempt.as_experiment` says."""
    experiment.update(summary)
    experiment["exp.id"] = exp_id
    experiment["results.status"] = status or STARTED
    if status_msg is not None:
        experiment["results.status_msg"] = status_msg
    else:
        experiment.pop("results.status_msg", None)
    experiment["results.attempt"] = attempt
    if log_path is not None:
        experiment["results.log_file"] = log_path
    if started_at is not None:
        experiment.setdefault("results.start_time", started_at)
    if ended_at is not None:
        experiment.setdefault("results.end_time", ended_at)
    return experiment


class StoredSummary(NamedTuple):
    """One attempt as reports read it (see `ResultsStore.summaries`)."""

    experiment: dict[str, Any]       # as Attempt.as_experiment(), without number series
    environment: dict[str, Any]
    samples: np.ndarray | None       # per-batch times, when asked for and present
    started_at: str
    ended_at: str | None
    rowid: int = 0


def _attempt_from_row(row: tuple[Any, ...]) -> Attempt:
    return Attempt(
        exp_id=row[0], attempt=row[1], status=row[2], status_msg=row[3],
        params=_loads(row[4]), results=_loads(row[5]), log_path=row[6],
        environment=_loads(row[7]), job_id=row[8], started_at=row[9], ended_at=row[10],
        summary=_loads(row[11]),
    )


def _connect_read_only(path: str) -> sqlite3.Connection:
    """Open for reading only (`mode=ro`: a run may be writing it meanwhile).

    `immutable` tells SQLite that nobody can change the file, so that it needs neither a
    lock nor the WAL index beside it: true only where its folder cannot be written
    (read-only media), where `mode=ro` alone cannot open a WAL database.
    """
    folder = os.path.dirname(os.path.abspath(path))
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    if not os.access(folder, os.W_OK):
        uri += "&immutable=1"
    try:
        # Not bound to the opening thread: a reader that decodes lazily closes its store
        # when it is garbage-collected, which may happen on any thread. It only ever reads.
        return sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT_S, isolation_level=None,
                               check_same_thread=False)
    except sqlite3.Error as error:
        raise ResultsError(f"results database {path}: cannot open: {error}") from error


def is_sqlite_file(path: str | os.PathLike[str]) -> bool:
    """Whether `path` starts with SQLite's file header (so `dlbs report` can tell DBs from logs)."""
    try:
        with open(path, "rb") as stream:
            return stream.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


class ResultsStore:
    """A results database; use as a context manager or call `close()`.

    Not shared between threads: open one per thread or process (SQLite serializes the
    writers; readers such as `dlbs report` never block a running sweep in WAL mode).
    """

    def __init__(self, path: str | os.PathLike[str], create: bool = True,
                 read_only: bool = False) -> None:
        self.path = os.fspath(path)
        self._coder = ViewCoder()
        self.read_only = read_only
        if (read_only or not create) and not os.path.isfile(self.path):
            raise ResultsError(f"no results database at {self.path}")
        if read_only:
            self._conn = _connect_read_only(self.path)
            try:
                if self._open_read_only():
                    # An older schema where the database can be written: migrated once, as
                    # any writer would, then read as it is now.
                    self._conn.close()
                    ResultsStore(self.path, create=False).close()
                    self._conn = _connect_read_only(self.path)
            except BaseException:
                self._conn.close()
                raise
            return
        if create:
            parent = os.path.dirname(os.path.abspath(self.path))
            try:
                os.makedirs(parent, exist_ok=True)
            except OSError as error:
                raise ResultsError(
                    f"cannot create the folder of results database {self.path}: "
                    f"{error.strerror or error}"
                ) from error
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None
            )
        except sqlite3.Error as error:
            raise ResultsError(f"cannot open results database {self.path}: {error}") from error
        try:
            self._open()
        except BaseException:
            self._conn.close()
            raise

    # -- opening, versions ----------------------------------------------------------------

    def _open_read_only(self) -> bool:
        """A reader's checks: a dlbs database of a schema this dlbs reads, nothing written.

        True when the schema is older and the database can be written (to be migrated).
        """
        with self._errors("open"):
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            application_id = self._conn.execute("PRAGMA application_id").fetchone()[0]
            self._check_identity(version, application_id)
            if version == 0:
                self._check_empty()
                raise ResultsError(f"results database {self.path}: cannot open: it holds no "
                                   "results (an empty database)")
            if version < SCHEMA_VERSION:
                if os.access(self.path, os.W_OK) and \
                        os.access(os.path.dirname(os.path.abspath(self.path)), os.W_OK):
                    return True
                raise ResultsError(
                    f"results database {self.path} has schema version {version}; where it "
                    f"cannot be written, it cannot be migrated to {SCHEMA_VERSION}",
                    hint="copy it where it can be written, or read it with the dlbs that "
                         "wrote it")
        return False

    def _open(self) -> None:
        with self._errors("open"):
            # One read transaction: another process may create the database meanwhile, and
            # its version and its tables must be seen together.
            self._conn.execute("BEGIN")
            try:
                version = self._conn.execute("PRAGMA user_version").fetchone()[0]
                application_id = self._conn.execute("PRAGMA application_id").fetchone()[0]
                self._check_identity(version, application_id)
                if version == 0:
                    self._check_empty()  # before WAL: never touch a foreign database
            finally:
                self._conn.execute("COMMIT")
            # Readers of an up-to-date WAL database take no write lock at all, so a report
            # never waits for (or delays) a running sweep.
            if self._conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal" and \
                    self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] != "wal":
                raise ResultsError(
                    f"results database {self.path}: cannot switch to WAL journal mode",
                    hint="keep the database on a local file system",
                )
            # NORMAL in WAL mode: a committed transaction survives the death of the process
            # (kill -9); only a power cut may lose the newest commits, never consistency.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            if version == SCHEMA_VERSION:
                return
            with self._transaction():
                # Read again inside the write lock: another process may have created or
                # migrated the database since we looked.
                version = self._conn.execute("PRAGMA user_version").fetchone()[0]
                self._check_identity(version, APPLICATION_ID)
                if version == 0:
                    self._check_empty()
                    for statement in _split_sql(SCHEMA):
                        self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
                    self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                elif version < SCHEMA_VERSION:
                    self._migrate(version)

    def _check_identity(self, version: int, application_id: int) -> None:
        if application_id not in (0, APPLICATION_ID):
            raise ResultsError(
                f"{self.path} is an SQLite database, but not a dlbs results database "
                f"(application id {application_id:#x})"
            )
        if version > SCHEMA_VERSION:
            raise ResultsError(
                f"results database {self.path} has schema version {version}; "
                f"this dlbs reads versions up to {SCHEMA_VERSION}",
                hint="use a newer dlbs to read it",
            )

    def _check_empty(self) -> None:
        tables = self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if tables:
            raise ResultsError(
                f"{self.path} is an SQLite database, but not a dlbs results database "
                "(it has tables and no dlbs schema version)"
            )

    def _migrate(self, version: int) -> None:
        while version < SCHEMA_VERSION:
            step = MIGRATIONS.get(version)
            if step is None:
                raise ResultsError(
                    f"results database {self.path} has schema version {version}, "
                    f"which this dlbs cannot migrate to {SCHEMA_VERSION}"
                )
            step(self._conn)
            version += 1
            self._conn.execute(f"PRAGMA user_version={version}")

    @property
    def schema_version(self) -> int:
        """The schema version of the open database."""
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    # -- plumbing -------------------------------------------------------------------------

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as error:
            raise ResultsError(
                f"results database {self.path}: cannot {action}: {error}",
                hint="is it a dlbs results database on a writable, local file system?",
            ) from error

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock at once, so two writers queue instead of one of
        # them failing at commit time.
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            self._coder.forget()  # keys, values or bases stored in this transaction are gone
            raise
        self._conn.execute("COMMIT")

    @contextmanager
    def _write(self, action: str) -> Iterator[sqlite3.Connection]:
        with self._errors(action), self._transaction() as conn:
            yield conn

    def close(self) -> None:
        """Close the connection (committed data is already on disk)."""
        self._conn.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- attempts -------------------------------------------------------------------------

    def next_attempt(self, exp_id: str) -> int:
        """The number the next attempt of `exp_id` gets (1 for a new experiment)."""
        with self._errors("read attempts"):
            row = self._conn.execute(
                "SELECT MAX(attempt) FROM attempts WHERE exp_id = ?", (exp_id,)
            ).fetchone()
        return 1 if row[0] is None else int(row[0]) + 1

    def record_start(
        self,
        exp_id: str,
        attempt: int,
        params: Mapping[str, Any],
        *,
        log_path: str | None = None,
        environment: Mapping[str, Any] | None = None,
        job_id: str | None = None,
        started_at: datetime | str | None = None,
    ) -> None:
        """Record that an attempt begins, before its backend (or job) starts."""
        with self._write(f"record the start of {exp_id} attempt {attempt}") as conn:
            self._insert(conn, exp_id, attempt, params, None, None, None, log_path,
                         environment, job_id, _timestamp(started_at), None)

    def record_end(
        self,
        exp_id: str,
        attempt: int,
        status: str,
        *,
        status_msg: str | None = None,
        results: Mapping[str, Any] | None = None,
        ended_at: datetime | str | None = None,
        environment: Mapping[str, Any] | None = None,
    ) -> None:
        """Complete a started attempt with its status, reason and results.

        `environment`, when given, replaces the one recorded at the start: a SLURM job
        learns where it ran only from its nodes.
        """
        _check_status(status)
        results = dict(results or {})
        with self._write(f"record the end of {exp_id} attempt {attempt}") as conn:
            row = conn.execute(
                "SELECT params, started_at, environment FROM attempts "
                "WHERE exp_id = ? AND attempt = ? AND ended_at IS NULL", (exp_id, attempt),
            ).fetchone()
            if row is None:
                raise ResultsError(
                    f"results database {self.path}: experiment {exp_id} has no open "
                    f"attempt {attempt} to end"
                )
            params, started_at = _loads(row[0]), row[1]
            if environment is None:
                environment = _loads(row[2])
            else:
                conn.execute("UPDATE attempts SET environment = ? WHERE exp_id = ? AND attempt = ?",
                             (_dumps(dict(environment)), exp_id, attempt))
            ended = _timestamp(ended_at)
            conn.execute(
                "UPDATE attempts SET status = ?, status_msg = ?, results = ?, ended_at = ?, "
                f"{_END_ASSIGNMENTS} WHERE exp_id = ? AND attempt = ?",
                (status, status_msg, _dumps(results), ended,
                 *self._derived(conn, exp_id, attempt, params, status, results, environment,
                                started_at, ended), exp_id, attempt),
            )

    def record_attempt(
        self,
        exp_id: str,
        attempt: int,
        params: Mapping[str, Any],
        status: str,
        *,
        status_msg: str | None = None,
        results: Mapping[str, Any] | None = None,
        log_path: str | None = None,
        environment: Mapping[str, Any] | None = None,
        at: datetime | str | None = None,
    ) -> None:
        """Record a whole attempt at once: one that never ran (skipped, cancelled early)."""
        _check_status(status)
        when = _timestamp(at)
        with self._write(f"record {exp_id} attempt {attempt}") as conn:
            self._insert(conn, exp_id, attempt, params, status, status_msg, results,
                         log_path, environment, None, when, when)

    def record_attempts(self, attempts: Iterable[Attempt]) -> int:
        """Record many ended attempts in one transaction (importing results); returns the count.

        Each attempt's summary is computed as `record_end` computes it; all are written or,
        on any error, none.
        """
        count = 0
        with self._write("record attempts") as conn:
            for item in attempts:
                if item.status is None:
                    raise ResultsError(f"attempt {item.attempt} of {item.exp_id} has no status")
                _check_status(item.status)
                started = _timestamp(item.started_at)
                self._insert(conn, item.exp_id, item.attempt, item.params, item.status,
                             item.status_msg, item.results, item.log_path, item.environment,
                             item.job_id, started, _timestamp(item.ended_at or started))
                count += 1
        return count

    def _insert(
        self, conn: sqlite3.Connection, exp_id: str, attempt: int, params: Mapping[str, Any],
        status: str | None, status_msg: str | None, results: Mapping[str, Any] | None,
        log_path: str | None, environment: Mapping[str, Any] | None, job_id: str | None,
        started_at: str, ended_at: str | None,
    ) -> None:
        try:
            conn.execute(
                f"INSERT INTO attempts ({_INSERT_COLUMNS}) VALUES ({_INSERT_VALUES})",
                (exp_id, attempt, status, status_msg, _dumps(dict(params)),
                 None if results is None else _dumps(dict(results)), log_path,
                 _dumps(dict(environment or {})), job_id, started_at, ended_at,
                 *self._derived(conn, exp_id, attempt, params, status,
                                None if results is None else dict(results), environment,
                                started_at, ended_at)),
            )
        except sqlite3.IntegrityError as error:
            raise ResultsError(
                f"results database {self.path}: experiment {exp_id} already has "
                f"attempt {attempt}",
                hint="take the number from next_attempt()",
            ) from error

    def _derived(self, conn: sqlite3.Connection, exp_id: str, attempt: int,
                 params: Mapping[str, Any], status: str | None,
                 results: Mapping[str, Any] | None, environment: Mapping[str, Any] | None,
                 started_at: str, ended_at: str | None) -> tuple[Any, ...]:
        """Values of the SUMMARY_NAMES and VIEW_NAMES columns, computed from the raw ones."""
        summary, summary_values = summary_row(params, results, started_at)
        base, codes = self._coder.columns(conn, view_of(params, summary, environment, exp_id))
        return (*summary_values, base, codes,
                report_row(status, attempt, started_at, ended_at, base, summary))

    def set_job_id(self, exp_id: str, attempt: int, job_id: str) -> None:
        """Remember the scheduler's job id of an open attempt, to re-attach to it later."""
        with self._write(f"set the job id of {exp_id} attempt {attempt}") as conn:
            cursor = conn.execute(
                "UPDATE attempts SET job_id = ? "
                "WHERE exp_id = ? AND attempt = ? AND ended_at IS NULL",
                (str(job_id), exp_id, attempt),
            )
            if cursor.rowcount != 1:
                raise ResultsError(
                    f"results database {self.path}: experiment {exp_id} has no open "
                    f"attempt {attempt}"
                )

    def pending_jobs(self) -> list[Attempt]:
        """Open attempts that have a job id: scheduler jobs to re-attach to."""
        return self._select("WHERE ended_at IS NULL AND job_id IS NOT NULL")

    def unfinished(self) -> list[Attempt]:
        """Open attempts without a job id: cut off by an interrupt or a crash of dlbs."""
        return self._select("WHERE ended_at IS NULL AND job_id IS NULL")

    def latest_attempt(self, exp_id: str) -> Attempt | None:
        """The newest attempt of `exp_id`, or None when it was never recorded."""
        found = self._select("WHERE exp_id = ? ORDER BY attempt DESC LIMIT 1", (exp_id,))
        return found[0] if found else None

    def latest_status(self, exp_id: str) -> str | None:
        """Status of the newest attempt: None if never recorded, STARTED if it never ended."""
        with self._errors("read attempts"):
            row = self._conn.execute(
                "SELECT status FROM attempts WHERE exp_id = ? ORDER BY attempt DESC LIMIT 1",
                (exp_id,),
            ).fetchone()
        if row is None:
            return None
        return row[0] or STARTED

    def latest_statuses(self) -> dict[str, str]:
        """`latest_status` of every recorded experiment, in one query (for large sweeps)."""
        with self._errors("read attempts"):
            rows = self._conn.execute("SELECT exp_id, status FROM experiments").fetchall()
        return {exp_id: status or STARTED for exp_id, status in rows}

    def attempts(self, exp_id: str | None = None, latest_only: bool = False) -> list[Attempt]:
        """Stored attempts, oldest first; of one experiment, or the newest of each."""
        table = "experiments" if latest_only else "attempts"
        if exp_id is None:
            return self._select("ORDER BY started_at, exp_id, attempt", table=table)
        return self._select("WHERE exp_id = ? ORDER BY attempt", (exp_id,), table=table)

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
        with self._errors("read attempts"):
            if rowids is None:
                rows = self._conn.execute(query + where).fetchall()
            else:
                rows = []
                for chunk in _chunks(rowids):
                    rows.extend(self._conn.execute(
                        query + f"WHERE rowid IN ({', '.join('?' * len(chunk))})", chunk))
        environments: dict[str | None, dict[str, Any]] = {}
        found = []
        loads = _loads
        with no_cyclic_gc():
            for (exp_id, attempt, status, status_msg, params, log_path, environment_text,
                 started_at, ended_at, summary, blob, rowid) in rows:
                environment = environments.get(environment_text)
                if environment is None:
                    environment = environments[environment_text] = _loads(environment_text)
                experiment = _flatten(loads(params), loads(summary), exp_id, attempt, status,
                                      status_msg, log_path, started_at, ended_at)
                found.append(StoredSummary(experiment, environment,
                                           stats.unpack_samples(blob), started_at, ended_at,
                                           rowid))
        return found

    # -- what the columnar reader (stored_columns.py) reads ---------------------------------

    def report_columns(self) -> list[tuple[int, bytes, bytes]]:
        """Every attempt's (rowid, `report_row`, `param_codes`), in rowid order."""
        with self._errors("read attempts"):
            return self._conn.execute(
                "SELECT rowid, report_row, param_codes FROM attempts ORDER BY rowid").fetchall()

    def view_keys(self) -> dict[int, str]:
        """Key id -> key of every key of a view (view_codes.py)."""
        with self._errors("read parameter keys"):
            return dict(self._conn.execute("SELECT id, key FROM param_keys"))

    def view_bases(self) -> dict[int, bytes]:
        """Base id -> its packed codes."""
        with self._errors("read parameter bases"):
            return dict(self._conn.execute("SELECT id, codes FROM param_bases"))

    def view_values(self, key_id: int) -> list[tuple[int, str]]:
        """(value number, canonical JSON) of every stored value of one key."""
        with self._errors("read parameter values"):
            return self._conn.execute(
                "SELECT number, value FROM param_values WHERE key_id = ?", (key_id,)).fetchall()

    def view_values_of(self, key_ids: Sequence[int]) -> list[tuple[int, int, str]]:
        """(key id, value number, canonical JSON) of every stored value of some keys."""
        found: list[tuple[int, int, str]] = []
        with self._errors("read parameter values"):
            for chunk in _chunks(key_ids):
                found.extend(self._conn.execute(
                    "SELECT key_id, number, value FROM param_values WHERE key_id IN "
                    f"({', '.join('?' * len(chunk))})", chunk))
        return found

    def view_value_number(self, key_id: int, text: str) -> int | None:
        """The number of one stored value of a key (canonical JSON), None when not stored."""
        with self._errors("read parameter values"):
            row = self._conn.execute("SELECT number FROM param_values WHERE key_id = ? AND "
                                     "value = ?", (key_id, text)).fetchone()
        return None if row is None else int(row[0])

    def log_statuses(self) -> dict[str, tuple[str, str, str | None]]:
        """Log file name -> (exp_id, status, status message) of every attempt that ended."""
        with self._errors("read attempts"):
            rows = self._conn.execute(
                "SELECT log_path, exp_id, status, status_msg FROM attempts "
                "WHERE status IS NOT NULL AND log_path IS NOT NULL").fetchall()
        return {os.path.basename(log_path): (exp_id, status, message)
                for log_path, exp_id, status, message in rows}

    def text_column(self, name: str) -> list[tuple[int, Any]]:
        """(rowid, value) of one of the attempts' own columns, for every attempt."""
        if name not in _TEXT_COLUMNS:
            raise ValueError(f"not a column to read alone: {name}")
        with self._errors("read attempts"):
            return self._conn.execute(f"SELECT rowid, {name} FROM attempts "
                                      f"WHERE {name} IS NOT NULL").fetchall()

    def summary_texts(self, containing: str) -> list[tuple[int, str]]:
        """(rowid, summary JSON) of the attempts whose summary holds the text `containing`."""
        with self._errors("read attempts"):
            return self._conn.execute(
                "SELECT rowid, summary FROM attempts WHERE instr(summary, ?) > 0",
                (containing,)).fetchall()

    def summary_values(self, key: str) -> list[tuple[int, str]] | None:
        """(rowid, the JSON text of summary[key]) of the attempts whose summary has `key`.

        None where SQLite cannot pick the value out (no `->` operator before 3.38, a key
        that its JSON paths cannot spell): read `summary_texts` instead.
        """
        if '"' in key or "\\" in key:
            return None
        try:
            rows = self._conn.execute(
                "SELECT rowid, summary -> ? FROM attempts WHERE instr(summary, ?) > 0",
                (f'$."{key}"', exact_json.dumps(key))).fetchall()
        except sqlite3.OperationalError:
            return None
        return [(rowid, text) for rowid, text in rows if text is not None]

    def samples_of(self, rowids: Sequence[int]) -> dict[int, np.ndarray | None]:
        """Per-batch times by rowid (None for an attempt that has none)."""
        found: dict[int, np.ndarray | None] = {}
        with self._errors("read attempts"):
            for chunk in _chunks(rowids):
                found.update((rowid, stats.unpack_samples(blob)) for rowid, blob in
                             self._conn.execute(
                                 "SELECT rowid, time_data FROM attempts WHERE rowid IN "
                                 f"({', '.join('?' * len(chunk))})", chunk))
        return found

    def _select(
        self, where: str, parameters: tuple[Any, ...] = (), table: str = "attempts"
    ) -> list[Attempt]:
        with self._errors("read attempts"):
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM {table} {where}", parameters
            ).fetchall()
        return [_attempt_from_row(row) for row in rows]

    # -- remembered out-of-memory failures ------------------------------------------------

    def record_oom(
        self, framework: str, device_type: str, model: str, dtype: str, phase: str,
        replica_batch: int, exp_id: str | None = None,
    ) -> None:
        """Remember that `replica_batch` ran out of memory; the smallest such batch is kept."""
        with self._write("record an out-of-memory failure") as conn:
            conn.execute(
                "INSERT INTO oom_limits (framework, device_type, model, dtype, phase, "
                "replica_batch, exp_id, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (framework, device_type, model, dtype, phase) DO UPDATE SET "
                "replica_batch = excluded.replica_batch, exp_id = excluded.exp_id, "
                "recorded_at = excluded.recorded_at "
                "WHERE excluded.replica_batch < oom_limits.replica_batch",
                (framework, device_type, model, dtype, phase, int(replica_batch), exp_id,
                 utc_now()),
            )

    def oom_limit(
        self, framework: str, device_type: str, model: str, dtype: str, phase: str
    ) -> int | None:
        """Smallest replica batch known to run out of memory for this combination, or None."""
        with self._errors("read out-of-memory limits"):
            row = self._conn.execute(
                "SELECT replica_batch FROM oom_limits WHERE framework = ? AND "
                "device_type = ? AND model = ? AND dtype = ? AND phase = ?",
                (framework, device_type, model, dtype, phase),
            ).fetchone()
        return None if row is None else int(row[0])

    def oom_limits(self) -> list[dict[str, Any]]:
        """Every remembered out-of-memory limit (for `dlbs report` and debugging)."""
        with self._errors("read out-of-memory limits"):
            rows = self._conn.execute(
                "SELECT framework, device_type, model, dtype, phase, replica_batch, exp_id, "
                "recorded_at FROM oom_limits ORDER BY framework, model, dtype, phase"
            ).fetchall()
        names = ("framework", "device_type", "model", "dtype", "phase", "replica_batch",
                 "exp_id", "recorded_at")
        return [dict(zip(names, row)) for row in rows]

    def integrity_check(self) -> str:
        """SQLite's own consistency check: 'ok' for a sound database."""
        with self._errors("check integrity"):
            return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])


def _check_status(status: str) -> None:
    if status not in STATUSES:
        raise ResultsError(
            f"unknown experiment status {status!r}; expected one of {', '.join(STATUSES)}"
        )


def _chunks(items: Sequence[int]) -> Iterator[list[int]]:
    items = list(items)
    for start in range(0, len(items), _ROWID_CHUNK):
        yield items[start:start + _ROWID_CHUNK]


def _split_sql(script: str) -> list[str]:
    # executescript() would COMMIT our transaction first; run the statements one by one.
    return [statement.strip() for statement in script.split(";\n") if statement.strip()]
