"""What both results stores share: one connection, errors, write transactions, claims.

A store (sqlite_store.py, postgres_store.py) opens its connection, checks and migrates the
schema, and says how a write transaction begins (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: a
transaction-wide advisory lock), so that writers queue instead of failing: every write is one
transaction and the writers of one database take turns. store_writes.py and store_reads.py
hold the statements, written once for both (sql_session.py).

A `dlbs run` *claims* the attempts it may settle before it resumes (`claim`): a store that
one run has to itself (SQLite, with its lock file) settles every open attempt, as it always
did; a shared store (PostgreSQL) only those of the claimed (host, log folder) scopes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from dlbs.errors import ResultsError
from dlbs.results.sql_session import Session
from dlbs.results.view_codes import ViewCoder


class SqlStore:
    """A results database over one connection (see the module); not shared between threads."""

    #: For messages: the path, or the URL without its password.
    location: str
    read_only: bool = False
    #: The driver's exceptions (sqlite3.Error, psycopg.Error).
    driver_errors: tuple[type[BaseException], ...] = ()
    #: The driver's exception for a broken key or check (a taken attempt number).
    integrity_errors: tuple[type[BaseException], ...] = ()
    #: Whether several `dlbs run` write the database at once (see `claim`).
    shared: bool = False
    _session: Session

    def __init__(self) -> None:
        self._coder = ViewCoder()
        # The (host, log folder) scopes a run claimed: None until `claim` (see the module).
        self._claimed: list[tuple[str, str]] | None = None

    # -- what each store says ---------------------------------------------------------------

    def _begin_write(self) -> None:
        """Begin a write transaction that holds the database's write lock."""
        raise NotImplementedError

    def _hint(self) -> str | None:
        """The hint of an error of the driver."""
        return None

    def _describe_error(self, error: BaseException) -> str:
        """The driver's error as one line, without credentials."""
        return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__

    def lock(self, host: str, folder: str) -> AbstractContextManager[Any]:
        """The lock one `dlbs run` holds on the database while it resumes and records."""
        raise NotImplementedError

    @property
    def schema_version(self) -> int:
        """The schema version of the open database."""
        raise NotImplementedError

    # -- plumbing ---------------------------------------------------------------------------

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except self.driver_errors as error:
            raise ResultsError(
                f"results database {self.location}: cannot {action}: "
                f"{self._describe_error(error)}", hint=self._hint(),
            ) from error

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        self._begin_write()
        try:
            yield self._session
        except BaseException:
            try:
                self._session.execute("ROLLBACK")
            except self.driver_errors:
                pass  # a lost connection took the transaction with it
            self._coder.forget()  # keys, values or bases stored in this transaction are gone
            raise
        self._session.execute("COMMIT")

    @contextmanager
    def _write(self, action: str) -> Iterator[Session]:
        if self.read_only:
            raise ResultsError(f"results database {self.location}: cannot {action}: it was "
                               "opened for reading only")
        with self._errors(action), self._transaction() as session:
            yield session

    def _read(self, action: str, statement: str, parameters: Sequence[Any] = (), *,
              binary: bool = False) -> list[Any]:
        with self._errors(action):
            return self._session.all(statement, parameters, binary=binary)

    def execute(self, action: str, statement: str, parameters: Sequence[Any] = ()) -> None:
        """One write of a table that another part of dlbs keeps here (`?` placeholders).

        The out-of-memory limits (dlbs/run/oom_limits.py) are such a table: its statements
        live next to the rule they serve, and run here in a transaction of their own.
        """
        with self._write(action) as session:
            session.execute(statement, parameters)

    def query(self, action: str, statement: str,
              parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a query of such a table (`?` placeholders)."""
        return [tuple(row) for row in self._read(action, statement, parameters)]

    # -- runs ---------------------------------------------------------------------------------

    @contextmanager
    def claim(self, host: str, folders: Sequence[str]) -> Iterator[None]:
        """Hold the run locks of (host, each log folder); resume then settles what they own.

        A store that a run has to itself takes one lock for the whole database, and its run
        settles every open attempt; a shared store locks each scope, and its run settles
        only the open attempts recorded from them (`_open_scope`).
        """
        from contextlib import ExitStack

        with ExitStack() as stack:
            for folder in (sorted(set(folders)) if self.shared else folders[:1]):
                stack.enter_context(self.lock(host, folder))
            self._claimed = [(host, folder) for folder in folders]
            try:
                yield
            finally:
                self._claimed = None

    def _open_scope(self) -> tuple[str, list[Any]]:
        """The SQL condition (and its parameters) of the open attempts a run may settle."""
        if not self.shared or not self._claimed:
            return "", []
        pairs = " OR ".join("(run_host = ? AND run_folder = ?)" for _ in self._claimed)
        return f" AND ({pairs})", [value for pair in self._claimed for value in pair]

    def close(self) -> None:
        """Close the connection (committed data is already stored)."""
        self._session.conn.close()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
