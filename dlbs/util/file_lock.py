"""Exclusive locks on files, so that two `dlbs run` never share a log folder or an SQLite store.

`fcntl.flock` on a lock file: `<log_dir>/.dlbs-run.lock` for a log folder (dlbs/run/lock.py),
`.<name>.dlbs-run.lock` beside an SQLite results database `<name>` (sqlite_store.py). The
kernel drops the lock when its holder dies, even by `kill -9`, so a crashed run never leaves
a stale lock behind. The holder writes its
pid into the file only so that the refusal can name it. The file itself stays (removing a
flock'ed file races with the next locker).

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


class FileLock:
    """An exclusive lock on the file `path` (a context manager); `what` names it in messages."""

    def __init__(self, path: str | os.PathLike[str], what: str, hint: str) -> None:
        self.path = os.fspath(path)
        #: The folder the lock file is made in (created when missing).
        self.folder = os.path.dirname(os.path.abspath(self.path))
        #: What the lock protects, for messages.
        self.what = what
        self.hint = hint
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise ResultsError naming the process that has it."""
        if self._fd is not None:
            return
        try:
            os.makedirs(self.folder, exist_ok=True)
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
            self._check_held()
        except ResultsError:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid is only for messages: a full disk does not make the lock weaker
        self._fd = fd

    def _check_held(self) -> None:
        """What must hold once the lock is taken (a subclass's rule); raise to refuse it."""

    def release(self) -> None:
        """Give the lock back (closing the descriptor releases the flock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class _NotALockFile(OSError):
    """Something other than a lock file of our own is in the lock's place."""


def _open_lock_file(path: str) -> int:
    """Open (or create) the lock file: a regular file with one link, never through a link."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        found = None
    if found is not None and not stat.S_ISREG(found.st_mode):
        raise _NotALockFile(errno.EEXIST, f"{kind_of(found.st_mode)} is in its place")
    # O_NOFOLLOW: a symbolic link put there after the lstat fails (ELOOP) instead of being
    # followed; O_NONBLOCK: a FIFO put there is never waited on.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK,
                 0o644)
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode) or opened.st_nlink != 1:
        os.close(fd)
        what = kind_of(opened.st_mode) if not stat.S_ISREG(opened.st_mode) else \
            "a file with other hard links"
        raise _NotALockFile(errno.EEXIST, f"{what} is in its place")
    return fd


def kind_of(mode: int) -> str:
    """What a file of `mode` is, in words: `a folder`, `a device`, ..."""
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
