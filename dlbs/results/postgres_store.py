"""The results store in PostgreSQL: one database for a team, written by many hosts at once.

`runtime.results_db: postgresql://user@host:5432/dbname` (psycopg 3). The layout, version
and semantics are SQLite's (postgres_schema.py); what differs:
- Writers on many hosts take turns: each write transaction begins by taking one
  transaction-wide advisory lock (`pg_advisory_xact_lock`), as SQLite's `BEGIN IMMEDIATE`
  does, so attempt numbers and the coded views (view_codes.py) are given out once; readers
  never wait (MVCC).
- Many `dlbs run` share the database: the run lock is a session advisory lock per (schema,
  host, log folder) of the run (advisory locks belong to the whole database, and a schema
  of it is a store of its own), and a run settles only the open attempts recorded from its
  own scopes (store_base.py, `claim`). The server drops a session's locks when its connection ends,
  `kill -9` included.
- Credentials come from the URL, `PGPASSFILE` (~/.pgpass) or the environment (`PGPASSWORD`,
  `PGUSER`, ...), as libpq reads them; messages name the database without its password, and
  nothing of the connection is stored with the results.
- An unreachable server, at the start or mid-run, is one clear error: the run stops, the
  experiment's log stays where it was written, for `dlbs parse` or `dlbs results copy`.
"""

from __future__ import annotations

import os
import socket
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.results import postgres_schema
from dlbs.results.attempt import NoStore, ReportColumns
from dlbs.results.schema import SCHEMA_VERSION
from dlbs.results.sql_session import POSTGRESQL, Session
from dlbs.results.store_reads import StoreReads
from dlbs.results.store_writes import StoreWrites
from dlbs.util import exact_json
from dlbs.util.credentials import canonical_url, is_database_url, passwords

# Advisory lock keys: one bigint for the writers' turn; (RUN_LOCK_CLASS, hash of a scope)
# for the runs' locks (the two forms never collide in PostgreSQL's lock table).
WRITE_LOCK = 0x646C6273_0001
RUN_LOCK_CLASS = 0x646C6273
#: A run's lock key: the class and the hash of its scope within the store's schema (advisory
#: locks belong to the whole database; a schema of it is a store of its own).
_RUN_LOCK_KEY = "?::int, hashtext(current_schema() || '|' || ?)"
_CONNECT_TIMEOUT_S = 15


def is_postgres_url(location: str) -> bool:
    """Whether `location` names a PostgreSQL database (its scheme in any case)."""
    return is_database_url(location)


def display(url: str) -> str:
    """The URL as messages show it: user, host, port and database, never a password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(canonical_url(url))
    except Exception:  # noqa: BLE001 - psycopg missing, or a URL it cannot read: say little
        return "postgresql://(a URL that cannot be read)"
    user = parts.pop("user", None)
    host = parts.pop("host", None) or "localhost"
    port = parts.pop("port", None)
    name = parts.pop("dbname", None) or ""
    parts.pop("password", None)
    where = f"{host}:{port}" if port else str(host)
    query = f"?{urllib.parse.urlencode(parts)}" if parts else ""
    return f"postgresql://{user + '@' if user else ''}{where}/{name}{query}"


class PostgresStore(StoreWrites, StoreReads):
    """A PostgreSQL results database (see the module); use as a context manager."""

    shared = True

    def __init__(self, url: str, create: bool = True, read_only: bool = False) -> None:
        super().__init__()
        try:
            import psycopg
        except ImportError as error:
            raise ResultsError("a postgresql:// results database needs psycopg",
                               hint="pip install 'psycopg[binary]' (pyproject.toml pins it)"
                               ) from error
        self.driver_errors = (psycopg.Error,)
        self.integrity_errors = (psycopg.errors.IntegrityError,)
        self.location = display(url)
        # The password as written and as libpq reads it: a driver's message may quote either.
        self._secrets = sorted(passwords(url), key=len, reverse=True)
        self.read_only = read_only
        try:
            conn = psycopg.connect(
                canonical_url(url), autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S,
                application_name=f"dlbs pid {os.getpid()} on {socket.gethostname()}"[:63],
                keepalives=1, keepalives_idle=30, keepalives_interval=10, keepalives_count=3)
        except psycopg.Error as error:
            raise ResultsError(f"results database {self.location}: cannot open: "
                               f"{self._describe_error(error)}",
                               hint=self._connect_hint(error)) from error
        except Exception as error:  # a malformed URL: psycopg.ProgrammingError or ValueError
            raise ResultsError(f"results database {self.location}: cannot open: not a "
                               "connection URL psycopg reads") from error
        self._session = Session(conn, POSTGRESQL)
        try:
            self._open(create)
            if read_only:
                with self._errors("open"):
                    conn.execute("SET default_transaction_read_only = on")
        except BaseException:
            conn.close()
            raise

    def _describe_error(self, error: BaseException) -> str:
        text = super()._describe_error(error)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _connect_hint(self, error: BaseException) -> str | None:
        if not self._secrets and "no password supplied" in str(error):
            # A plan file never keeps the password (dlbs/util/credentials.py).
            return ("the URL holds no password (a plan written by `dlbs plan -o` never "
                    "does): set PGPASSWORD, or give it in PGPASSFILE (default ~/.pgpass, "
                    "mode 0600); docs/security.md")
        return self._hint()

    def _hint(self) -> str | None:
        return ("is the server up and reachable, and do the URL, PGPASSFILE or PGPASSWORD "
                "give a user who may use the database? The logs of the run are kept: "
                "`dlbs results copy LOG_FOLDER DB` records them later")

    def _begin_write(self) -> None:
        self._session.execute("BEGIN")
        self._session.execute("SELECT pg_advisory_xact_lock(?)", (WRITE_LOCK,))

    def _contains(self, column: str) -> str:
        return f"strpos({column}, ?) > 0"

    # -- opening, versions ----------------------------------------------------------------

    def _open(self, create: bool) -> None:
        version = self._version()
        if version == SCHEMA_VERSION:
            self._ensure_indexes()
            return
        if self.read_only and version == 0:
            raise ResultsError(f"results database {self.location}: cannot open: it holds no "
                               "results (an empty database)")
        if not create and version == 0:
            raise NoStore(f"no results database at {self.location}")
        try:
            with self._errors("open"), self._transaction() as session:
                # Read again inside the write lock: another writer may have created or
                # migrated the database since we looked.
                version = self._version()
                if version == 0:
                    for statement in postgres_schema.statements():
                        session.execute(statement)
                    session.execute("INSERT INTO dlbs_meta (name, value) VALUES (?, ?), "
                                    "(?, ?)", ("application", postgres_schema.APPLICATION,
                                               "schema_version", str(SCHEMA_VERSION)))
                    version = SCHEMA_VERSION
                self._migrate(session, version)
                for statement in postgres_schema.INDEXES.values():
                    session.execute(statement)
        except ResultsError as error:
            if not self.read_only or version == 0:
                raise
            # A reader migrates an older database as a writer would, where its user may
            # change the tables; one who may only read is told who can.
            raise ResultsError(
                f"results database {self.location} has schema version {version}; this dlbs "
                f"reads version {SCHEMA_VERSION} and could not migrate it: {error.message}",
                hint="open it once as a user who may change its tables (a `dlbs run` or "
                     "`dlbs results copy` into it migrates it), or read it with the dlbs "
                     "that wrote it") from error

    def _ensure_indexes(self) -> None:
        """A writer adds the indexes (postgres_schema.INDEXES) a store made before them lacks."""
        if self.read_only:
            return
        with self._errors("open"):
            missing = [statement for name, statement in postgres_schema.INDEXES.items()
                       if self._session.one("SELECT to_regclass(?) IS NULL", (name,))[0]]
            if missing:
                with self._transaction() as session:
                    for statement in missing:
                        session.execute(statement)

    def _migrate(self, session: Session, version: int) -> None:
        """Upgrade the layout from `version`, a step per version, in the open transaction.

        A step (postgres_schema.MIGRATIONS) and the version it reaches are committed
        together, or, when anything fails, nothing is: the database keeps its old version.
        """
        while version < SCHEMA_VERSION:
            step = postgres_schema.MIGRATIONS.get(version)
            if step is None:
                raise ResultsError(
                    f"results database {self.location} has schema version {version}, "
                    f"which this dlbs cannot migrate to {SCHEMA_VERSION}",
                    hint="PostgreSQL stores begin at version 4; read it with the dlbs that "
                         "wrote it")
            step(session)
            version += 1
            session.execute("UPDATE dlbs_meta SET value = ? WHERE name = 'schema_version'",
                            (str(version),))

    def _version(self) -> int:
        """The schema version (0: an empty database); refuses foreign and newer ones."""
        with self._errors("open"):
            meta = self._session.one("SELECT to_regclass('dlbs_meta') IS NOT NULL")[0]
            if not meta:
                tables = self._session.one(
                    "SELECT count(*) FROM information_schema.tables "
                    "WHERE table_schema = current_schema()")[0]
                if tables:
                    raise ResultsError(
                        f"{self.location} is a PostgreSQL database, but not a dlbs results "
                        "database (its schema has tables and no dlbs_meta)",
                        hint="name another database, or another schema with "
                             "?options=-csearch_path%3DNAME")
                return 0
            rows = dict(self._session.all("SELECT name, value FROM dlbs_meta"))
        if rows.get("application") != postgres_schema.APPLICATION:
            raise ResultsError(f"{self.location}: table dlbs_meta does not name a dlbs "
                               "results database")
        try:
            version = int(rows.get("schema_version", ""))
        except ValueError:
            raise ResultsError(f"{self.location}: dlbs_meta holds no schema version") from None
        if version > SCHEMA_VERSION:
            raise ResultsError(
                f"results database {self.location} has schema version {version}; "
                f"this dlbs reads versions up to {SCHEMA_VERSION}",
                hint="use a newer dlbs to read it")
        return version

    @property
    def schema_version(self) -> int:
        """The schema version of the open database."""
        return self._version()

    # -- runs ---------------------------------------------------------------------------------

    @contextmanager
    def lock(self, host: str, folder: str) -> Iterator[None]:
        """The run lock of (schema, host, log folder): a session advisory lock, while it runs."""
        scope = f"{host}:{folder}"
        with self._errors("take the run lock"):
            taken = self._session.one(f"SELECT pg_try_advisory_lock({_RUN_LOCK_KEY})",
                                      (RUN_LOCK_CLASS, scope))[0]
        if not taken:
            raise ResultsError(
                f"another dlbs run is using results database {self.location} for log "
                f"folder {folder} on host {host}",
                hint="wait for it to end, or give this run another exp.log_dir")
        try:
            yield
        finally:
            try:
                self._session.execute(f"SELECT pg_advisory_unlock({_RUN_LOCK_KEY})",
                                      (RUN_LOCK_CLASS, scope))
            except self.driver_errors:
                pass  # the connection is gone, and the server dropped the lock with it

    # -- reads only PostgreSQL has ----------------------------------------------------------

    def report_columns(self) -> ReportColumns:
        """Every attempt's `report_row` and `param_codes`, in rowid order (see ReportColumns).

        The server concatenates them (`string_agg`), from the index `attempts_report`, so
        that a few values come back per query rather than a row per attempt; a query per
        `_REPORT_CHUNK` attempts (a bytea value holds at most 1 GB).
        """
        pieces: list[tuple[np.ndarray, ...]] = []
        after = -1
        while True:
            [(count, *values)] = self._read("read attempts", _REPORT_QUERY,
                                            (after, _REPORT_CHUNK), binary=True)
            if not count:
                break
            ids, row_sizes, rows, code_sizes, codes = (
                np.frombuffer(bytes(value or b""), dtype=dtype)
                for value, dtype in zip(values, (">i8", ">i4", np.uint8, ">i4", np.uint8)))
            pieces.append(_in_rowid_order(ids.astype(np.int64), row_sizes.astype(np.intp),
                                          rows, code_sizes.astype(np.intp), codes))
            if count < _REPORT_CHUNK:
                break
            after = int(pieces[-1][0][-1])
        if not pieces:
            empty = np.zeros(0, dtype=np.intp)
            return ReportColumns(np.zeros(0, dtype=np.int64), b"", empty, b"", empty)
        ids, row_sizes, rows, code_sizes, codes = (np.concatenate(part) for part in
                                                   zip(*pieces))
        return ReportColumns(ids, rows.tobytes(), row_sizes, codes.tobytes(), code_sizes)

    def summary_values(self, key: str) -> list[tuple[int, str]] | None:
        """(rowid, the JSON text of summary[key]) of the attempts whose summary has `key`.

        `json` (not `jsonb`) keeps each value's text as written; None when the server
        cannot read a summary as JSON (read `summary_texts` instead).
        """
        try:
            rows: list[Any] = self._session.all(
                "SELECT rowid, (summary::json -> ?)::text FROM attempts "
                "WHERE strpos(summary, ?) > 0", (key, exact_json.dumps(key)))
        except self.driver_errors:
            return None
        return [(rowid, text) for rowid, text in rows if text is not None]


# Attempts that report_columns reads per query, and the query (one row: the count, then
# rowids, report rows and codes, each with their sizes, in the order the server read them).
_REPORT_CHUNK = 200_000
_REPORT_QUERY = (
    "SELECT count(*), string_agg(int8send(rowid), ''::bytea), "
    "string_agg(int4send(coalesce(length(report_row), 0)), ''::bytea), "
    "string_agg(coalesce(report_row, ''::bytea), ''::bytea), "
    "string_agg(int4send(coalesce(length(param_codes), 0)), ''::bytea), "
    "string_agg(coalesce(param_codes, ''::bytea), ''::bytea) "
    "FROM (SELECT rowid, report_row, param_codes FROM attempts WHERE rowid > ? "
    "ORDER BY rowid LIMIT ?) AS chunk")


def _in_rowid_order(ids: np.ndarray, row_sizes: np.ndarray, rows: np.ndarray,
                    code_sizes: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, ...]:
    """The attempts of one query in rowid order (the server reads them in it, as a rule)."""
    if len(ids) < 2 or bool((ids[1:] > ids[:-1]).all()):
        return ids, row_sizes, rows, code_sizes, codes
    order = np.argsort(ids, kind="stable")
    return (ids[order], row_sizes[order], _gathered(rows, row_sizes, order),
            code_sizes[order], _gathered(codes, code_sizes, order))


def _gathered(data: np.ndarray, sizes: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The pieces of `data` (of `sizes`, one after the other) in `order`."""
    starts = np.cumsum(sizes) - sizes
    taken = sizes[order]
    return data[np.repeat(starts[order] - (np.cumsum(taken) - taken), taken) +
                np.arange(int(taken.sum()))]
