"""A running attempt's progress notes, read from its log as the backend writes them.

A backend's output goes straight into the attempt's log (the child's stdout is the file, or
a container's output is copied into it). A long run says how far it has come in progress
notes, `__progress__=<json>` lines (docs/backends/protocol.md section 3: a max_qps search's
trials, each with its rate and verdict). `LogFollower` reads what is appended to the log,
every `POLL_S` seconds while the attempt runs and once more when it ends, and hands each
note to `on_note` as a `ProgressNote`; the run loop shows it (`dlbs run`'s progress lines).

Only whole lines are read while the log grows; a line longer than `MAX_READ` bytes is
skipped (a note is one short line), so reading stays bounded whatever a backend prints.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dlbs.config.names import PROGRESS_KEY
from dlbs.results.protocol import ProtocolParser

#: Seconds between two reads of a growing log.
POLL_S = 1.0
#: The most bytes one read takes (a line longer than this is skipped).
MAX_READ = 1 << 20
#: The longest note shown, characters.
MAX_TEXT = 300
_MARKER = f"__{PROGRESS_KEY}__=".encode()


@dataclass(frozen=True)
class ProgressNote:
    """One progress note of a backend: the line shown, and the value it printed."""

    text: str
    value: Any


def note_text(value: Any) -> str:
    """The line shown for a note: its `message` (or the value itself), on one line."""
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        text = value["message"]
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 3] + "..."


class LogFollower:
    """Reads the progress notes appended to `path` after it was opened (a context manager)."""

    def __init__(self, path: str, on_note: Callable[[ProgressNote], None],
                 poll_s: float = POLL_S) -> None:
        self.path = path
        self.poll_s = poll_s
        self._parser = ProtocolParser(
            on_progress=lambda value: on_note(ProgressNote(note_text(value), value)))
        self._offset = self._size()
        self._skipping = False  # inside a line longer than MAX_READ
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="dlbs-log-follower",
                                        daemon=True)

    def __enter__(self) -> LogFollower:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        while self._read(final=True):
            pass

    def _size(self) -> int:
        try:
            with open(self.path, "rb") as log:
                return log.seek(0, 2)
        except OSError:
            return 0

    def _follow(self) -> None:
        while not self._stop.wait(self.poll_s):
            while self._read(final=False):
                pass

    def _read(self, final: bool) -> bool:
        """Read the next part of the log; whether a whole MAX_READ was read (more may wait)."""
        try:
            with open(self.path, "rb") as log:
                log.seek(self._offset)
                chunk = log.read(MAX_READ)
        except OSError:
            return False
        if not chunk:
            return False
        end = chunk.rfind(b"\n") + 1
        if end == 0 and not final:
            if len(chunk) < MAX_READ:
                return False  # the line is not finished yet
            self._offset += len(chunk)  # a line too long to be a note: skip it
            self._skipping = True
            return True
        whole = chunk if final else chunk[:end]
        self._offset += len(whole)
        lines = whole.split(b"\n")
        if self._skipping:  # the rest of a skipped line
            lines, self._skipping = lines[1:], False
        self._parser.feed_lines([line for line in lines if _MARKER in line])
        return len(chunk) == MAX_READ
