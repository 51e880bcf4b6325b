"""Where a command's result goes: `-o FILE` (atomically) or standard output.

Formats that people read (text tables, markdown) have the characters that would act on a
terminal escaped (`dlbs.util.terminal.visible`): a value such as `exp.model` or a trace
event's name never recolours, retitles or rewrites the terminal. Machine formats (JSON, CSV,
HTML) carry values exactly.
"""

from __future__ import annotations

import sys

from dlbs.util.atomic import atomic_write
from dlbs.util.terminal import visible

#: Formats that people read on a terminal.
HUMAN_FORMATS = frozenset({"text", "markdown", "table"})


def emit(text: str, fmt: str, output: str | None = None) -> None:
    """Write a command's result in format `fmt` to `output`, or to standard output."""
    if fmt in HUMAN_FORMATS:
        text = visible(text)
    if output:
        atomic_write(output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
