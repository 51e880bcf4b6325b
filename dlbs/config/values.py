"""How resolved values become text, and how text becomes typed values.

Rendering rules are docs/language.md section 4: booleans as `true`/`false`, null as the empty
string (as `null` inside expressions), numbers as written, lists as their items joined by
single spaces, objects as compact JSON. Casting rules are section 6.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from typing import Any

import orjson

from dlbs.config.documents import unique_keys
from dlbs.config.limits import INT_MAX, INT_MIN, MAX_NESTING, MAX_VALUE_CHARS
from dlbs.errors import ConfigError
from dlbs.util import exact_json
from dlbs.util.booleans import WORDS_TEXT, parse_bool

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
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # an integer beyond 64 bits, which check_plain then refuses
        return exact_json.dumps(value)


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
        raise ConfigError(f"cannot split {short(text)} into words: {error}") from None
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
        raise ValueError(f"{short(value)} is not an int")
    if declared == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise ValueError(f"{short(value)} is not a float")
    if declared == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and parse_bool(value) is not None:
            return parse_bool(value)
        raise ValueError(f"{short(value)} is not a bool ({WORDS_TEXT})")
    if declared == "list":
        if isinstance(value, list):
            return value
        if isinstance(value, str):
            return split_words(value)
        raise ValueError(f"{short(value)} is not a list")
    if declared == "dict":
        if isinstance(value, dict):
            return value
        if isinstance(value, str):
            try:
                parsed = json.loads(value, object_pairs_hook=unique_keys) \
                    if value.strip() else {}
            except (ValueError, RecursionError):  # not JSON, a key twice, too deep
                parsed = None
            if isinstance(parsed, dict):
                return parsed
        raise ValueError(f"{short(value)} is not a dict")
    raise ValueError(f"unknown type {declared!r}")


# Blanks around the separators of a GPU list ("0, 1"): DLBS counted GPUs on whitespace-split
# lists, so its users wrote them; one spelling keeps "0, 1" and "0,1" one experiment.
_GPU_LIST_BLANKS = re.compile(r"\s*([:,])\s*")


def _gpu_list(value: Any) -> Any:
    return _GPU_LIST_BLANKS.sub(r"\1", value.strip()) if isinstance(value, str) else value


#: Parameters whose values may be written more than one way, and their one spelling; a
#: value is brought to it after it is cast and before it is checked (docs/language.md
#: section 6).
NORMALISED = {"exp.gpus": _gpu_list}


def normalise(name: str, value: Any) -> Any:
    """`value` of parameter `name` in its one spelling (most parameters: as it is)."""
    spell = NORMALISED.get(name)
    return value if spell is None else spell(value)


def check_plain(value: Any) -> Any:
    """`value` if it is plain data that every reader of a plan holds exactly, else ConfigError.

    Plain data is null, booleans, integers of 64 bits, finite floats, strings without NUL
    bytes (no argument, path or environment variable can hold one), lists and objects with
    string keys, nested at most `MAX_NESTING` deep and at most `MAX_VALUE_CHARS` long as
    JSON (docs/language.md section 6). Scalars, by far the most common, cost one type test.
    """
    kind = type(value)
    if kind is str:
        if "\x00" in value:
            raise ConfigError("the value holds a NUL byte, which no argument, path or "
                              "environment variable can hold")
        if not value.isascii():
            _check_unicode(value)
        if len(value) > MAX_VALUE_CHARS:
            raise ConfigError(f"the value is {len(value):,} characters long, more than "
                              f"{MAX_VALUE_CHARS:,}")
        return value
    if value is None or kind is bool or kind is float and math.isfinite(value) or \
            kind is int and INT_MIN <= value <= INT_MAX:
        return value
    if kind is list:
        # Argument lists, the common container: one joined string is checked at C speed.
        try:
            joined = "\n".join(value)
        except TypeError:  # not only strings
            _check_tree(value)
        else:
            check_plain(joined)
        return value
    _check_tree(value)
    return value


def _check_tree(value: Any) -> None:
    """The walk of check_plain for containers and bad scalars, with a size budget."""
    budget = MAX_VALUE_CHARS
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str:
            if "\x00" in item:
                raise ConfigError("a string in the value holds a NUL byte, which no argument, "
                                  "path or environment variable can hold")
            if not item.isascii():
                _check_unicode(item)
            budget -= len(item) + 3
        elif item is None or kind is bool:
            budget -= 5
        elif kind is int:
            if not INT_MIN <= item <= INT_MAX:
                raise ConfigError(f"the integer {short(item)} does not fit in 64 bits "
                                  f"({INT_MIN} to {INT_MAX})")
            budget -= 21
        elif kind is float:
            if not math.isfinite(item):
                raise ConfigError(f"{item!r} is not a number a plan can hold (JSON has no "
                                  f"infinities or NaN)")
            budget -= 25
        elif kind is list or kind is dict:
            if depth >= MAX_NESTING:
                raise ConfigError(f"the value is nested more than {MAX_NESTING} levels deep")
            budget -= 2 + len(item)
            if budget < 0:
                break
            if kind is dict:
                for key in item:
                    if type(key) is not str:
                        raise ConfigError(f"an object key must be a string, not "
                                          f"{type_name(key)} {short(key)}")
                    stack.append((key, depth + 1))
                items = item.values()
            else:
                items = item
            stack.extend((child, depth + 1) for child in items)
        else:
            raise ConfigError(f"a {type(item).__name__} is not a value: values are null, "
                              f"booleans, numbers, strings, lists and objects")
        if budget < 0:
            break
    if budget < 0:
        raise ConfigError(f"the value is more than {MAX_VALUE_CHARS:,} characters long as JSON")


def _check_unicode(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ConfigError(f"the value is not valid text: {short(text[error.start:error.end])} "
                          f"at character {error.start} (bytes that are not UTF-8, or a lone "
                          f"surrogate)") from None


def short(value: Any, width: int = 40) -> str:
    """`repr(value)`, cut to `width` to fit one line of an error message (never a 10**5000)."""
    if type(value) is int and value.bit_length() > 200:
        return f"of {value.bit_length()} bits"
    shown = repr(value)
    return shown if len(shown) <= width else shown[:width - 3] + "..."
