"""JSON text of any value that a log may hold, with orjson's speed where orjson can.

The log protocol reads integers exactly, however large (docs/backends/protocol.md), and
values nested up to the decoders' limits; orjson writes neither an integer beyond 64 bits
nor a value nested more than 255 levels. Such a value is written by Python's `json`
instead: integers stay exact, NaN and infinities become null as orjson makes them.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson


def dumps(value: Any, *, indent: bool = False, sort_keys: bool = False) -> str:
    """`value` as JSON text (`default=str` for odd types); see the module doc."""
    option = (orjson.OPT_INDENT_2 if indent else 0) | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    try:
        return orjson.dumps(value, default=str, option=option).decode()
    except TypeError:  # orjson.JSONEncodeError: a big integer, deep nesting
        pass
    try:
        return json.dumps(_finite(value), default=str, sort_keys=sort_keys, ensure_ascii=False,
                          indent=2 if indent else None,
                          separators=(",", ": ") if indent else (",", ":"))
    except RecursionError:
        return json.dumps(f"<a value nested too deeply to write: {type(value).__name__}>")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    return value


# 19 or more digits in a row: possibly an integer beyond 64 bits, which orjson would read as
# a float. A float's repr never has that many digits in a row. Found by mapping the digits to
# NUL (which JSON text never holds raw) and looking for a run: a str.translate and a
# substring search, several times faster than a regular expression on every value read.
_DIGITS_TO_NUL = str.maketrans("0123456789", "\0" * 10)
_BYTE_DIGITS_TO_NUL = bytes.maketrans(b"0123456789", b"\0" * 10)
_LONG_RUN = "\0" * 19
_LONG_BYTE_RUN = b"\0" * 19


def has_long_digits(text: str | bytes) -> bool:
    """Whether JSON text may hold an integer orjson cannot read exactly (module comment)."""
    if isinstance(text, bytes):
        return _LONG_BYTE_RUN in text.translate(_BYTE_DIGITS_TO_NUL)
    return _LONG_RUN in text.translate(_DIGITS_TO_NUL)


def loads(text: str | bytes) -> Any:
    """The value of JSON text that `dumps` wrote, integers exact however large.

    ValueError for text that is not JSON, or whose strings hold a lone surrogate (an escaped
    half of a UTF-16 pair: no Unicode text, which orjson refuses too, and which no file,
    terminal or database could take).
    """
    if not has_long_digits(text):
        return orjson.loads(text)
    return unicode_only(json.loads(text))


def unicode_only(value: Any) -> Any:
    """`value` as Python's json decoded it, unless a string of it holds a lone surrogate.

    Raises ValueError then (see `loads`). One encoding of the whole value, in C.
    """
    try:
        json.dumps(value, ensure_ascii=False, check_circular=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone surrogate (not Unicode text)") from None
    except (TypeError, ValueError, RecursionError):
        pass   # NaN and the like are fine; what could not be written is no surrogate
    return value
