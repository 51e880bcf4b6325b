"""The results store in one SQLite file: the default, one per log folder.

The database runs in WAL mode, so readers (`dlbs report` during a sweep) never block the
writer, and with `synchronous=NORMAL` a committed transaction survives a `kill -9`. The
schema carries a version (`PRAGMA user_version`) and an application id: a newer database is
refused, an older one is migrated in one transaction (migrations.py), a foreign SQLite file
is refused. One `dlbs run` at a time has the database (`lock`: a file beside it), so its
resume settles every open attempt. The layout is documented in docs/results.md.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import urllib.parse
from typing import Any

from dlbs.errors import ResultsError
from dlbs.results.attempt import NoStore
from dlbs.results.migrations import MIGRATIONS
from dlbs.results.schema import APPLICATION_ID, SCHEMA, SCHEMA_VERSION
from dlbs.results.sql_session import SQLITE, Session
from dlbs.results.store_reads import StoreReads
from dlbs.results.store_writes import StoreWrites
from dlbs.util import exact_json
from dlbs.util.file_lock import FileLock, kind_of
from dlbs.util.regular_files import head

_BUSY_TIMEOUT_S = 30.0
#: The lock file of a database `<folder>/<name>`: `<folder>/.<name>` + this.
DATABASE_LOCK_SUFFIX = ".dlbs-run.lock"
_HEADER = b"SQLite format 3\x00"


def is_sqlite_file(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a regular file that starts with SQLite's header (databases, not logs).

    A FIFO or a device is no database, and is never opened to wait on (regular_files.head).
    """
    try:
        return head(path, len(_HEADER)) == _HEADER
    except (OSError, ValueError):
        return False


def database_lock_path(database: str | os.PathLike[str]) -> str:
    """The lock file of a database: `.<name>.dlbs-run.lock` beside its real path."""
    folder, name = os.path.split(os.path.realpath(os.fspath(database)))
    return os.path.join(folder, f".{name}{DATABASE_LOCK_SUFFIX}")


def refuse_if_not_a_file(path: str) -> None:
    """Refuse a results database that is not a regular file (nothing there yet is fine).

    `/dev/null`, a FIFO or a folder is refused before anything is opened or made beside it
    (a lock file in /dev).
    """
    try:
        found = os.stat(path)
    except OSError:
        return
    if not stat.S_ISREG(found.st_mode):
        raise ResultsError(f"results database {path} is {kind_of(found.st_mode)}, not a "
                           "regular file", hint="point runtime.results_db at a file "
                                                "(default: results.db in exp.log_dir)")


class DatabaseLock(FileLock):
    """The run lock of an SQLite database, by its identity rather than by the name given.

    The lock file sits beside the database's real path (every symbolic link, of the file or
    of a folder above it, resolved), and a database with more than one hard link is refused:
    two names of one file would be two locks (SQLite, too, keeps a database's journal by
    name).
    """

    def __init__(self, database: str | os.PathLike[str]) -> None:
        path = os.fspath(database)
        refuse_if_not_a_file(path)
        #: The real path of the database this lock protects.
        self.database = os.path.realpath(path)
        what = f"results database {path}"
        if self.database != os.path.abspath(path):
            what += f" (that is {self.database})"
        super().__init__(database_lock_path(path), what,
                         "wait for it to end, or give this run another runtime.results_db")

    def _check_held(self) -> None:
        try:
            found = os.stat(self.database)
        except OSError:
            return  # not there yet (the run creates it), or the store says why not
        if stat.S_ISREG(found.st_mode) and found.st_nlink > 1:
            raise ResultsError(
                f"{self.what} has {found.st_nlink - 1} other hard link(s): another name of it "
                "would let a second dlbs run use it at once",
                hint="give this run a database of its own (runtime.results_db), or remove "
                     "the other links")


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


class SqliteStore(StoreWrites, StoreReads):
    """An SQLite results database; use as a context manager or call `close()`.

    Not shared between threads: open one per thread or process (SQLite serializes the
    writers; readers such as `dlbs report` never block a running sweep in WAL mode).
    """

    driver_errors = (sqlite3.Error,)
    integrity_errors = (sqlite3.IntegrityError,)
    shared = False

    def __init__(self, path: str | os.PathLike[str], create: bool = True,
                 read_only: bool = False) -> None:
        super().__init__()
        self.path = os.fspath(path)
        self.location = self.path
        self.read_only = read_only
        refuse_if_not_a_file(self.path)
        if (read_only or not create) and not os.path.isfile(self.path):
            raise NoStore(f"no results database at {self.path}")
        if read_only:
            self._session = Session(_connect_read_only(self.path), SQLITE)
            try:
                if self._open_read_only():
                    # An older schema where the database can be written: migrated once, as
                    # any writer would, then read as it is now.
                    self._session.conn.close()
                    SqliteStore(self.path, create=False).close()
                    self._session = Session(_connect_read_only(self.path), SQLITE)
            except BaseException:
                self._session.conn.close()
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
            conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as error:
            raise ResultsError(f"cannot open results database {self.path}: {error}") from error
        self._session = Session(conn, SQLITE)
        try:
            self._open()
        except BaseException:
            conn.close()
            raise

    @property
    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection = self._session.conn
        return conn

    def _hint(self) -> str | None:
        return "is it a dlbs results database on a writable, local file system?"

    def _begin_write(self) -> None:
        # IMMEDIATE takes the write lock at once, so two writers queue instead of one of
        # them failing at commit time.
        self._conn.execute("BEGIN IMMEDIATE")

    def _contains(self, column: str) -> str:
        return f"instr({column}, ?) > 0"

    def lock(self, host: str, folder: str) -> FileLock:
        """The database's own lock (DatabaseLock), for one `dlbs run` at a time.

        A run closes the open attempts it finds, so two runs with different log folders on
        one SQLite database would close each other's live attempts.
        """
        return DatabaseLock(self.path)

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

    # -- reads only SQLite has --------------------------------------------------------------

    def summary_values(self, key: str) -> list[tuple[int, str]] | None:
        """(rowid, the JSON text of summary[key]) of the attempts whose summary has `key`.

        None where SQLite cannot pick the value out (no `->` operator before 3.38, a key
        that its JSON paths cannot spell): read `summary_texts` instead.
        """
        if '"' in key or "\\" in key:
            return None
        try:
            rows: list[Any] = self._conn.execute(
                "SELECT rowid, summary -> ? FROM attempts WHERE instr(summary, ?) > 0",
                (f'$."{key}"', exact_json.dumps(key))).fetchall()
        except sqlite3.OperationalError:
            return None
        return [(rowid, text) for rowid, text in rows if text is not None]

    def integrity_check(self) -> str:
        """SQLite's own consistency check: 'ok' for a sound database."""
        with self._errors("check integrity"):
            return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])


def _split_sql(script: str) -> list[str]:
    # executescript() would COMMIT our transaction first; run the statements one by one.
    return [statement.strip() for statement in script.split(";\n") if statement.strip()]
