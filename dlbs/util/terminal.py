r"""Text from values made safe to show on a terminal.

A value in a spec, a log or a trace (`exp.model`, an event's name) may hold control
characters: ANSI and OSC escapes recolour the terminal, move the cursor, set its title,
write the clipboard or make links; a carriage return overwrites what was printed; bidi
overrides reorder what follows. Shown on a terminal they would act, not read. `visible`
writes each such character as a Python escape (`\x1b`, `\u202e`), so what a user reads is
what the value holds. Machine formats (JSON, CSV) keep values exactly; this is for what
people read: tables, progress lines, error messages.
"""

from __future__ import annotations

import functools
import re

# C0 controls but tab and newline, DEL and C1 controls; the bidi embeddings, overrides,
# isolates and marks; the line and paragraph separators (a terminal may break lines there).
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"


@functools.cache
def _unsafe(in_line: bool) -> re.Pattern[str]:
    """The characters to escape; `in_line`: newline and tab too, for text kept on one line.

    Compiled when first needed: its ranges past U+00FF make `re` build large tables, about
    5 million instructions, which every command paid at start-up for its rare messages.
    """
    return re.compile(f"[{_UNSAFE}\n\t]" if in_line else f"[{_UNSAFE}]")


def _plain(text: str) -> bool:
    """Printable ASCII (no newline, no tab): nothing to escape, the common case."""
    return text.isascii() and text.isprintable()


def _escaped(match: re.Match[str]) -> str:
    character = match.group()
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(character) or \
        (f"\\x{ord(character):02x}" if ord(character) < 0x100 else f"\\u{ord(character):04x}")


def visible(text: str) -> str:
    """`text` with every character that acts on a terminal escaped; newlines and tabs kept."""
    if _plain(text):
        return text
    unsafe = _unsafe(False)
    return unsafe.sub(_escaped, text) if unsafe.search(text) else text


def one_line(text: str) -> str:
    """`visible(text)` on one line: newlines and tabs are escaped too."""
    if _plain(text):
        return text
    unsafe = _unsafe(True)
    return unsafe.sub(_escaped, text) if unsafe.search(text) else text
