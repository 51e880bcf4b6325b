"""How numbers are written: exactly for programs, to significant digits for people.

CSV and JSON carry a stored value exactly and with its type: a float as Python's repr writes
it (the shortest text that reads back as the same float: 0.935, 200.0), an integer as an
integer (a sample count: 200). Text, markdown and HTML round to `DIGITS` significant digits,
never into the integer part and without trailing zeros: 0.935, 95.24, 609.5, 1164, 200.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

DIGITS = 4
# Floats that hold an integer are written as one below this (exact in a double).
_EXACT_INTEGERS = 2.0 ** 53


def significant(value: float) -> str:
    """`value` to DIGITS significant digits (see the module); `-` when not finite."""
    if not math.isfinite(value):
        return "-"
    if value.is_integer() and abs(value) < _EXACT_INTEGERS:
        return str(int(value))
    magnitude = math.floor(math.log10(abs(value))) + 1 if value else 1
    decimals = max(DIGITS - magnitude, 0)
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def significant_all(values: np.ndarray) -> list[str]:
    """`significant` of each value ("nan" and infinities: `-`)."""
    return [significant(value) for value in values.tolist()]


def exact(value: Any) -> Any:
    """A value as CSV and JSON carry it: as stored, a float that is not finite as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
