"""Write files so that readers see the old content or the new, never half of it.

The one writer of every file dlbs produces on request (`-o FILE`, sbatch scripts, reports).
What is at the path decides how it is written:
- nothing, or a regular file: a temporary file beside it is written, fsync'ed and renamed
  over it (atomic; the file's mode is kept when it existed);
- a symbolic link: the same, at the link's final target; the link itself stays a link;
- a character device or a FIFO (`/dev/null`, `/dev/stdout`, a named pipe): written through,
  since such a thing can't be replaced and a user who names it means it;
- anything else (a folder, a socket, a block device): refused.
Failures raise `OutputError` naming the path, never an OSError.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from dlbs.errors import OutputError


def _describe(error: OSError) -> str:
    return error.strerror or str(error)


def _resolve(path: Path) -> tuple[Path, os.stat_result | None]:
    """The path to write (a link's final target) and what is there now (None: nothing)."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        return target, os.stat(target)
    except FileNotFoundError:
        return target, None
    except OSError as error:
        raise OutputError(f"cannot write {path}: {_describe(error)}") from None


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: str = "w",
                  permissions: int | None = None) -> Iterator[IO]:
    """Open `path` for writing as the module doc says; `mode` is "w" (text) or "wb".

    On success the new content replaces the old; on any exception nothing changes.
    `permissions` sets the mode of a newly created file (default 0o644 less the umask's
    usual bits); an existing regular file keeps its own.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_writer writes text (w) or bytes (wb), not {mode!r}")
    requested = Path(path)
    target, status = _resolve(requested)
    encoding = None if "b" in mode else "utf-8"
    if status is not None and (stat.S_ISCHR(status.st_mode) or stat.S_ISFIFO(status.st_mode)):
        try:
            with open(target, mode, encoding=encoding) as stream:
                yield stream
        except OSError as error:
            raise OutputError(f"cannot write {requested}: {_describe(error)}") from None
        return
    if status is not None and not stat.S_ISREG(status.st_mode):
        kind = "a folder" if stat.S_ISDIR(status.st_mode) else "not a regular file"
        raise OutputError(f"cannot write {requested}: it is {kind}",
                          hint="name a file path")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                         dir=target.parent)
    except OSError as error:
        raise OutputError(f"cannot write {requested}: {_describe(error)}") from None
    try:
        with os.fdopen(fd, mode, encoding=encoding) as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        if status is not None:
            os.chmod(temporary, stat.S_IMODE(status.st_mode))
        else:
            os.chmod(temporary, 0o644 if permissions is None else permissions)
        os.replace(temporary, target)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise OutputError(f"cannot write {requested}: {_describe(error)}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def atomic_write(path: str | os.PathLike[str], data: str | bytes,
                 permissions: int | None = None) -> None:
    """Write all of `data` to `path` with `atomic_writer`."""
    with atomic_writer(path, "wb", permissions) as stream:
        stream.write(data.encode() if isinstance(data, str) else data)
