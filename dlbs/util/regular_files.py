"""Reading the start of a file that may be anything: a FIFO or a device is never waited on.

Readers that look at a file to learn what it is (a results database, a trace) must not block
on a FIFO (open() waits for a writer) nor read a device: `head` opens without blocking and
reads only a regular file; `special_kind` says what else a path is.
"""

from __future__ import annotations

import os
import stat

from dlbs.util.file_lock import kind_of


def special_kind(path: str | os.PathLike[str]) -> str | None:
    """What `path` is when it exists and is neither a regular file nor a folder, in words.

    Links are followed (a link to a database is the database). None when there is nothing,
    or a regular file, or a folder.
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return kind_of(mode)


def head(path: str | os.PathLike[str], size: int) -> bytes:
    """The first `size` bytes of the regular file `path`.

    Raises OSError when it cannot be read or is not a regular file (opened with O_NONBLOCK,
    so a FIFO swapped in after a check is refused, never waited on).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{os.fspath(path)} is not a regular file")
        chunks = []
        while size > 0:
            chunk = os.read(fd, size)
            if not chunk:
                break
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
