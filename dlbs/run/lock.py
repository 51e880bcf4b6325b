"""Exclusive locks, so that two `dlbs run` never share a log folder or a results database.

`fcntl.flock` on a lock file: `<log_dir>/.dlbs-run.lock` for a log folder, and
`.<name>.dlbs-run.lock` beside a results database `<name>` (`runtime.results_db` may be shared
by runs with different log folders: each closes the open attempts it finds there, so two at
once would close each other's live attempts). A database is locked by its identity, not by
the name a run was given: the lock file sits beside its real path (every symbolic link, of
the file or of a folder above it, resolved), and a database with more than one hard link
is refused (two names of one file would be two locks; SQLite, too, keeps a database's
journal by name). `database_lock_path` says where a database's lock is.

The kernel drops the lock when its holder dies, even by `kill -9`, so a crashed run never
leaves a stale lock behind. The holder writes its pid into the file only so that the
refusal can name it. The file itself stays (removing a flock'ed file races with the next
locker).

The lock file is only ever a regular file of its own: a symbolic link, a hard link to
another file, a FIFO or a device in its place is refused without being written (or, for all
but a hard link, opened), so that a lock never truncates someone else's file.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat

from dlbs.errors import ResultsError

LOCK_FILE_NAME = ".dlbs-run.lock"
#: The lock file of a results database `<folder>/<name>`: `<folder>/.<name>` + this.
DATABASE_LOCK_SUFFIX = ".dlbs-run.lock"


class RunLock:
    """Hold `RunLock(log_dir)` (a context manager) for the whole of a `dlbs run`.

    `RunLock.of_database(path)` locks a results database instead.
    """

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.log_dir = os.fspath(log_dir)
        self.path = os.path.join(self.log_dir, LOCK_FILE_NAME)
        #: What the lock protects, for messages.
        self.what = self.log_dir
        self.hint = "wait for it to end, or give this run another exp.log_dir"
        #: The real path of the results database this lock protects (None: a log folder).
        self.database: str | None = None
        self._fd: int | None = None

    @classmethod
    def of_database(cls, database: str | os.PathLike[str]) -> RunLock:
        """The lock of a results database (a file beside its real path; see the module doc).

        A database that is no regular file (`/dev/null`, a FIFO, a folder) is refused before
        any lock file is made beside it (in `/dev`).
        """
        path = os.fspath(database)
        try:
            found = os.stat(path)
        except OSError:
            found = None
        if found is not None and not stat.S_ISREG(found.st_mode):
            raise ResultsError(f"results database {path} is {_kind(found.st_mode)}, not a "
                               f"regular file", hint="point runtime.results_db at a file "
                                                     "(default: results.db in exp.log_dir)")
        lock = cls(os.path.dirname(database_lock_path(path)))
        lock.path = database_lock_path(path)
        lock.database = os.path.realpath(path)
        lock.what = f"results database {path}"
        if lock.database != os.path.abspath(path):
            lock.what += f" (that is {lock.database})"
        lock.hint = "wait for it to end, or give this run another runtime.results_db"
        return lock

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise ResultsError naming the process that has it."""
        if self._fd is not None:
            return
        try:
            os.makedirs(self.log_dir, exist_ok=True)
            fd = _open_lock_file(self.path)
        except OSError as error:
            raise ResultsError(
                f"cannot create the run lock {self.path}: {_reason(error)}",
                hint="remove what is in its place; a run lock is only ever a regular file"
                if isinstance(error, _NotALockFile) or error.errno == errno.ELOOP else None,
            ) from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise ResultsError(f"another dlbs run is using {self.what} (pid {holder})",
                               hint=self.hint) from None
        except OSError as error:
            os.close(fd)
            raise ResultsError(
                f"cannot lock {self.path}: {error.strerror or error}",
                hint="the log folder must be on a file system that supports flock",
            ) from error
        try:
            self._check_database()
        except ResultsError:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid is only for messages: a full disk does not make the lock weaker
        self._fd = fd

    def _check_database(self) -> None:
        """A locked database must have one name: a hard link would be a second lock."""
        if self.database is None:
            return
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

    def release(self) -> None:
        """Give the lock back (closing the descriptor releases the flock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def database_lock_path(database: str | os.PathLike[str]) -> str:
    """The lock file of a results database: `.<name>.dlbs-run.lock` beside its real path."""
    folder, name = os.path.split(os.path.realpath(os.fspath(database)))
    return os.path.join(folder, f".{name}{DATABASE_LOCK_SUFFIX}")


class _NotALockFile(OSError):
    """Something other than a lock file of our own is in the lock's place."""


def _open_lock_file(path: str) -> int:
    """Open (or create) the lock file: a regular file with one link, never through a link."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        found = None
    if found is not None and not stat.S_ISREG(found.st_mode):
        raise _NotALockFile(errno.EEXIST, f"{_kind(found.st_mode)} is in its place")
    # O_NOFOLLOW: a symbolic link put there after the lstat fails (ELOOP) instead of being
    # followed; O_NONBLOCK: a FIFO put there is never waited on.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK,
                 0o644)
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode) or opened.st_nlink != 1:
        os.close(fd)
        what = _kind(opened.st_mode) if not stat.S_ISREG(opened.st_mode) else \
            "a file with other hard links"
        raise _NotALockFile(errno.EEXIST, f"{what} is in its place")
    return fd


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "something that is not a regular file"


def _reason(error: OSError) -> str:
    if isinstance(error, _NotALockFile):
        return str(error.strerror)
    if error.errno == errno.ELOOP:
        return "a symbolic link is in its place"
    return str(error.strerror or error)


def _read_pid(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return "unknown"
    return text if text.isdigit() else "unknown"
