"""The lock of a log folder, so that two `dlbs run` never share one.

`<log_dir>/.dlbs-run.lock`, held for the whole of a `dlbs run` (dlbs/util/file_lock.py: the
kernel drops it when its holder dies, even by `kill -9`). A results store has a run lock of
its own (`ResultsStore.claim`): a file beside an SQLite database, advisory locks in
PostgreSQL.
"""

from __future__ import annotations

import os

from dlbs.util.file_lock import FileLock

LOCK_FILE_NAME = ".dlbs-run.lock"


class RunLock(FileLock):
    """Hold `RunLock(log_dir)` (a context manager) for the whole of a `dlbs run`."""

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        folder = os.fspath(log_dir)
        super().__init__(os.path.join(folder, LOCK_FILE_NAME), folder,
                         "wait for it to end, or give this run another exp.log_dir")
        self.log_dir = folder
        self.folder = folder
