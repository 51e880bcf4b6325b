"""The results store: one interface, two databases, one factory.

Every reader and writer (the run loop, `dlbs parse`, `report`, `compare`, `plot`, `trace`,
`results copy`, `history`, `serve`) opens a store with `open_store(location)` and uses the
`ResultsStore` protocol below; none constructs a concrete store or looks at a database's
file. `location` is what `runtime.results_db` holds:
- a path: an SQLite file (sqlite_store.py), the default `${exp.log_dir}/results.db`, one
  `dlbs run` at a time;
- a `postgresql://` URL: a PostgreSQL database (postgres_store.py) that many `dlbs run` on
  many hosts write at once.
Both keep the same layout and version (schema.py, postgres_schema.py); store_writes.py and
store_reads.py hold what they share. docs/results.md documents it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from dlbs.errors import ResultsError
from dlbs.results.attempt import STARTED, Attempt, NoStore, ReportColumns, StoredSummary
from dlbs.results.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "STARTED", "Attempt", "NoStore", "ReportColumns", "ResultsStore",
           "StoredSummary", "is_store", "is_store_url", "open_existing_store", "open_store",
           "refuse_unsupported_url", "store_name"]

# (run_tag, run_host, run_folder) of the `dlbs run` that records an attempt.
RunFields = tuple[str | None, str | None, str | None]


class ResultsStore(Protocol):
    """What every results store offers (see the module)."""

    #: The path, or the URL without its password: for messages.
    location: str
    read_only: bool
    #: Whether several `dlbs run` write it at once (PostgreSQL), or one at a time (SQLite).
    shared: bool

    @property
    def schema_version(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> ResultsStore: ...
    def __exit__(self, *exc: object) -> None: ...

    # -- the run loop's writes (store_writes.py) ----------------------------------------------
    def next_attempt(self, exp_id: str) -> int: ...
    def record_start(self, exp_id: str, attempt: int | None, params: Mapping[str, Any], *,
                     log_path: str | None = None,
                     environment: Mapping[str, Any] | None = None,
                     job_id: str | None = None, started_at: datetime | str | None = None,
                     run: RunFields = (None, None, None)) -> int: ...
    def record_end(self, exp_id: str, attempt: int, status: str, *,
                   status_msg: str | None = None, results: Mapping[str, Any] | None = None,
                   ended_at: datetime | str | None = None,
                   environment: Mapping[str, Any] | None = None) -> None: ...
    def record_attempt(self, exp_id: str, attempt: int | None, params: Mapping[str, Any],
                       status: str, *, status_msg: str | None = None,
                       results: Mapping[str, Any] | None = None, log_path: str | None = None,
                       environment: Mapping[str, Any] | None = None,
                       at: datetime | str | None = None,
                       run: RunFields = (None, None, None)) -> int: ...
    def record_attempts(self, attempts: Iterable[Attempt]) -> int: ...
    def set_job_id(self, exp_id: str, attempt: int, job_id: str) -> None: ...

    # -- resuming (store_base.py, store_reads.py) ------------------------------------------
    def claim(self, host: str, folders: Sequence[str]) -> AbstractContextManager[None]: ...
    def latest_statuses(self, run_tag: str | None = None,
                        run_host: str | None = None) -> dict[str, str]: ...
    def latest_places(self, run_tag: str | None = None,
                      run_host: str | None = None) -> dict[str, tuple[str, str | None]]: ...
    def latest_status(self, exp_id: str) -> str | None: ...
    def latest_attempt(self, exp_id: str) -> Attempt | None: ...
    def pending_jobs(self) -> list[Attempt]: ...
    def unfinished(self) -> list[Attempt]: ...

    # -- tables that other parts of dlbs keep here (the OOM limits) --------------------------
    def execute(self, action: str, statement: str, parameters: Sequence[Any] = ()) -> None: ...
    def query(self, action: str, statement: str,
              parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    # -- readers: parse, copy, trace, reports (store_reads.py) -------------------------------
    def attempts(self, exp_id: str | None = None,
                 latest_only: bool = False) -> list[Attempt]: ...
    def iter_attempts(self, ended_only: bool = True, chunk: int = 2000) -> Iterator[Attempt]: ...
    def attempt_keys(self) -> list[tuple[int, str, int, str]]: ...
    def runs(self) -> list[tuple[Any, ...]]: ...
    def change_marker(self) -> tuple[Any, ...]: ...
    def experiments(self) -> Iterator[dict[str, Any]]: ...
    def summaries(self, latest_only: bool = False, with_samples: bool = False,
                  ended_only: bool = False,
                  rowids: Sequence[int] | None = None) -> list[StoredSummary]: ...
    def report_columns(self) -> ReportColumns: ...
    def view_keys(self) -> dict[int, str]: ...
    def view_bases(self) -> dict[int, bytes]: ...
    def view_values(self, key_id: int) -> list[tuple[int, str]]: ...
    def view_values_of(self, key_ids: Sequence[int]) -> list[tuple[int, int, str]]: ...
    def view_value_number(self, key_id: int, text: str) -> int | None: ...
    def log_statuses(self) -> dict[str, tuple[str, str, str | None]]: ...
    def text_column(self, name: str) -> list[tuple[int, Any]]: ...
    def summary_texts(self, containing: str) -> list[tuple[int, str]]: ...
    def summary_values(self, key: str) -> list[tuple[int, str]] | None: ...
    def samples_of(self, rowids: Sequence[int]) -> dict[int, np.ndarray | None]: ...


def is_store_url(location: str | os.PathLike[str]) -> bool:
    """Whether `location` is a database URL (not a path); its scheme in any case."""
    from dlbs.results.postgres_store import is_postgres_url

    return isinstance(location, str) and is_postgres_url(location)


def refuse_unsupported_url(location: str | os.PathLike[str]) -> None:
    """Refuse a location that is a URL of no store dlbs opens (`mysql://u:pw@host/db`).

    Taken as an SQLite path it would make folders named after it and put its password in
    them; the message shows it without the password (docs/security.md, "Credentials").
    """
    from dlbs.util.credentials import looks_like_url, without_password

    if looks_like_url(location) and not is_store_url(location):
        raise ResultsError(
            f"{without_password(str(location))} is a URL of no results store dlbs opens",
            hint="a results store is an SQLite file (a path) or a postgresql:// URL")


def is_store(location: str | os.PathLike[str]) -> bool:
    """Whether `location` names a results store: a URL, or a file that is an SQLite database."""
    from dlbs.results.sqlite_store import is_sqlite_file

    return is_store_url(location) or is_sqlite_file(location)


def store_name(location: str | os.PathLike[str]) -> str:
    """`location` as messages and pages show it (a URL without its password)."""
    if is_store_url(location):
        from dlbs.results.postgres_store import display

        return display(str(location))
    return os.fspath(location)


def open_store(location: str | os.PathLike[str], *, create: bool = True,
               read_only: bool = False) -> ResultsStore:
    """The results store at `location` (see the module).

    `create`: make it (and an SQLite file's folder) when it does not exist; `read_only`:
    a reader, which never writes (an SQLite file is opened read-only; a PostgreSQL session
    is read-only), except to migrate an older schema where it may. A URL of another scheme
    is refused (`refuse_unsupported_url`).
    """
    refuse_unsupported_url(location)
    if is_store_url(location):
        from dlbs.results.postgres_store import PostgresStore

        return PostgresStore(str(location), create=create, read_only=read_only)
    from dlbs.results.sqlite_store import SqliteStore

    return SqliteStore(location, create=create, read_only=read_only)


def open_existing_store(location: str | os.PathLike[str]) -> ResultsStore | None:
    """The store at `location` when it exists, else None (nothing is created)."""
    try:
        return open_store(location, create=False)
    except NoStore:
        return None
