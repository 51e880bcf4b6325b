"""How resolved values become text, and how text becomes typed values.

Rendering rules are docs/language.md section 4: booleans as `true`/`false`, null as the empty
string (as `null` inside expressions), numbers as written, lists as their items joined by
single spaces, objects as compact JSON. Casting rules are section 6.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import orjson

from dlbs.errors import ConfigError
from dlbs.util.booleans import parse_bool

TYPES = ("str", "int", "float", "bool", "list", "dict")

# Characters that make a string more than one shell word, or change how it is split.
_NEEDS_QUOTES = re.compile(r"[\s'\"\\]")


def render(value: Any, null: str = "") -> str:
    """Render a resolved value as text inside a longer string."""
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return null
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return " ".join(render(item, null) for item in value)
    return orjson.dumps(value).decode()


def shell_word(text: str) -> str:
    """Quote `text` as one POSIX shell word when it would otherwise split or lose quotes."""
    if text and _NEEDS_QUOTES.search(text) is None:
        return text
    return shlex.quote(text)


def split_words(text: str) -> list[str]:
    """Split a string as a POSIX shell would, keeping each word re-quotable as one item.

    List items are shell fragments (launchers split each item again), so a word holding
    spaces is kept quoted: `"-v '/a b:/c'"` becomes `["-v", "'/a b:/c'"]`.
    """
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise ConfigError(f"cannot split {text!r} into words: {error}") from None
    return [shell_word(word) for word in words]


def type_name(value: Any) -> str:
    """The spec type a JSON value has."""
    if isinstance(value, bool):
        return "bool"
    for name, python_type in (("int", int), ("float", float), ("str", str), ("list", list),
                              ("dict", dict)):
        if isinstance(value, python_type):
            return name
    return "null" if value is None else type(value).__name__


def cast(value: Any, declared: str | None) -> Any:
    """Cast a resolved value to its declared type; raise ValueError with the reason."""
    if declared is None or value is None:
        return value
    if declared == "str":
        return value if isinstance(value, str) else render(value)
    if declared == "int":
        if isinstance(value, bool):
            raise ValueError("a boolean is not an int")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise ValueError(f"{value!r} is not an int")
    if declared == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise ValueError(f"{value!r} is not a float")
    if declared == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and parse_bool(value) is not None:
            return parse_bool(value)
        raise ValueError(f"{value!r} is not a bool (true/false/yes/no/on/off/1/0)")
    if declared == "list":
        if isinstance(value, list):
            return value
        if isinstance(value, str):
            return split_words(value)
        raise ValueError(f"{value!r} is not a list")
    if declared == "dict":
        if isinstance(value, dict):
            return value
        if isinstance(value, str):
            try:
                parsed = orjson.loads(value) if value.strip() else {}
            except orjson.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict):
                return parsed
        raise ValueError(f"{value!r} is not a dict")
    raise ValueError(f"unknown type {declared!r}")
