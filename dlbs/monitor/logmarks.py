"""The backend's marks of its timed interval, seen as they are appended to the log.

A backend prints `__results.timed_start__="<UTC time>"` just before its first timed batch and
`__results.timed_end__=...` right after the last one has finished (docs/backends/protocol.md).
The monitor follows the log while it samples: when a mark appears it takes a sample at once,
so that the energy counters have a reading within a few tens of milliseconds of each end of
the timed interval (docs/efficiency.md). Only what is appended after the monitor started is
read, a bounded amount per poll; a log that cannot be read means no marks, never an error.

Stand-alone: standard library only, Python 3.8.
"""

from __future__ import annotations

import os

#: The protocol keys of the marks, as the backend prints them.
MARK_KEYS = ("results.timed_start", "results.timed_end")
_PREFIXES = tuple(f"__{key}__=".encode() for key in MARK_KEYS)
#: The most bytes one poll reads; a backend printing faster than this is read over polls.
READ_LIMIT = 1 << 20
#: A line longer than this is not a mark: its start is dropped rather than kept in memory.
LINE_LIMIT = 1 << 16


class LogMarks:
    """Follows the file `path` from its size at `start()`; `poll()` -> marks seen since."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def start(self) -> None:
        """Read from here on: what the log holds now is an earlier attempt's, or a header."""
        try:
            self._offset = os.stat(self.path).st_size
        except OSError:
            self._offset = 0  # not there yet: everything it will hold is new

    def poll(self) -> list:
        """The mark keys in the lines appended since the last poll, in order."""
        try:
            if os.stat(self.path).st_size == self._offset:  # the usual look: nothing new
                return []
            with open(self.path, "rb") as log:
                size = os.fstat(log.fileno()).st_size
                if size < self._offset:  # replaced or truncated: start over
                    self._offset, self._partial = 0, b""
                if size == self._offset:
                    return []
                log.seek(self._offset)
                data = log.read(READ_LIMIT)
        except OSError:
            return []
        self._offset += len(data)
        lines = (self._partial + data).replace(b"\r", b"\n").split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > LINE_LIMIT:
            self._partial = b""
        found = []
        for line in lines:
            for key, prefix in zip(MARK_KEYS, _PREFIXES):
                if prefix in line:  # after a launcher's rank prefix too (`[default0]:`)
                    found.append(key)
        return found
