"""The marks of a backend's timed interval: `results.timed_start` and `results.timed_end`.

A backend prints the first just before its first timed batch starts (after the warm-up and
with the device idle) and the second as soon as the last timed batch has finished on the
device, each with the wall-clock time in UTC to the microsecond. dlbs's monitor follows the
log and reads the energy counters when each mark appears; the summaries place the timed
interval on the monitor's clock with them (docs/efficiency.md). Only the process that prints
results marks (rank 0). Standard library only, Python 3.8+: the dummy backend, which has no
numpy, marks with its own `emit`.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from collections.abc import Callable
from typing import Any

TIMED_START = "results.timed_start"
TIMED_END = "results.timed_end"


def _now_iso() -> str:
    # datetime.UTC is Python 3.11+; this package runs on 3.8 too.
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")  # noqa: UP017


def print_line(key: str, value: Any) -> None:
    """Print `__key__=json` on stdout and flush: for code that has no printer of its own."""
    sys.stdout.write(f"__{key}__={json.dumps(value)}\n")
    sys.stdout.flush()


class TimedMarks:
    """Prints the two marks with `emit(key, value)`, the backend's protocol printer.

    A disabled one (the ranks that print no results) prints nothing.
    """

    def __init__(self, emit: Callable[[str, Any], None], enabled: bool = True) -> None:
        self.emit = emit
        self.enabled = enabled

    @classmethod
    def for_this_process(cls, emit: Callable[[str, Any], None]) -> TimedMarks:
        """Marks printed by rank 0 only (RANK from torchrun or srun; none: rank 0)."""
        return cls(emit, enabled=(os.environ.get("RANK") or "0").strip() == "0")

    def start(self) -> None:
        """The timed interval begins now."""
        if self.enabled:
            self.emit(TIMED_START, _now_iso())

    def end(self) -> None:
        """The timed interval has ended (the device has finished its last timed batch)."""
        if self.enabled:
            self.emit(TIMED_END, _now_iso())
