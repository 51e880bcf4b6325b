"""An exclusive lock on a log folder, so that two `dlbs run` never share one.

`fcntl.flock` on `<log_dir>/.dlbs-run.lock`: the kernel drops the lock when its holder dies,
even by `kill -9`, so a crashed run never leaves a stale lock behind. The holder writes its
pid into the file only so that the refusal can name it. The file itself stays (removing a
flock'ed file races with the next locker).
"""

from __future__ import annotations

import fcntl
import os

from dlbs.errors import ResultsError

LOCK_FILE_NAME = ".dlbs-run.lock"


class RunLock:
    """Hold `RunLock(log_dir)` (a context manager) for the whole of a `dlbs run`."""

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.log_dir = os.fspath(log_dir)
        self.path = os.path.join(self.log_dir, LOCK_FILE_NAME)
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
            os.makedirs(self.log_dir, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise ResultsError(
                f"cannot create the run lock {self.path}: {error.strerror or error}"
            ) from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise ResultsError(
                f"another dlbs run is using {self.log_dir} (pid {holder})",
                hint="wait for it to end, or give this run another exp.log_dir",
            ) from None
        except OSError as error:
            os.close(fd)
            raise ResultsError(
                f"cannot lock {self.path}: {error.strerror or error}",
                hint="the log folder must be on a file system that supports flock",
            ) from error
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

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


def _read_pid(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return "unknown"
    return text if text.isdigit() else "unknown"
