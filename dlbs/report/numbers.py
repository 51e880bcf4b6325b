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
    """`significant` of each value ("nan" and infinities: `-`), the same texts, faster.

    A report of 100,000 experiments writes hundreds of thousands of numbers: the decimals of
    each come from numpy, and the values of one number of decimals are formatted together
    by one bound `str.format` (no Python call per value). `math.log10`, which `significant`
    uses, is asked again where numpy's logarithm is within a hair of an integer, so that a
    value next to a power of ten gets the decimals `significant` gives it.
    """
    numbers = np.asarray(values, dtype=np.float64).reshape(-1)
    texts = np.full(len(numbers), "-", dtype=object)
    finite = np.isfinite(numbers)
    magnitude = np.abs(numbers)
    whole = finite & (numbers == np.round(numbers)) & (magnitude < _EXACT_INTEGERS)
    fraction = finite & ~whole
    with np.errstate(divide="ignore", invalid="ignore"):
        logarithm = np.log10(np.where(fraction, magnitude, 1.0))
    decimals = np.maximum(DIGITS - (np.floor(logarithm) + 1), 0).astype(np.int64)
    for index in np.flatnonzero(fraction & (np.abs(logarithm - np.round(logarithm)) < 1e-9)
                                ).tolist():
        decimals[index] = max(DIGITS - (math.floor(math.log10(magnitude[index])) + 1), 0)
    texts[whole] = list(map("{:.0f}".format, numbers[whole].tolist()))
    for count in np.unique(decimals[fraction]).tolist():
        chosen = fraction & (decimals == count)
        formatted = map(f"{{:.{count}f}}".format, numbers[chosen].tolist())
        # A fixed-point text of some decimals always has its point: trailing zeros go.
        texts[chosen] = [text.rstrip("0").rstrip(".") for text in formatted] if count else \
            list(formatted)
    for index in np.flatnonzero(texts == "-0").tolist():   # -0.0, or a tiny negative value
        texts[index] = "0"
    return texts.tolist()


def exact(value: Any) -> Any:
    """A value as CSV and JSON carry it: as stored, a float that is not finite as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
