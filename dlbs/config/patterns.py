"""Regular expressions of specs: Python's syntax, with a time budget.

Conditions of extensions, `regex` of definitions and `re.*` in expressions all match
through here. They use the `regex` package, which reads Python's `re` syntax (lookaround and
backreferences included) and, unlike `re`, stops a match that runs past its timeout: a
catastrophic pattern such as `(a|aa)+` costs at most `EXPRESSION_SECONDS`, then one error
(docs/language.md section 7, docs/security.md).
"""

from __future__ import annotations

import string
from typing import Any

import regex

from dlbs.config.limits import EXPRESSION_SECONDS, MAX_STRING
from dlbs.config.values import short
from dlbs.errors import ConfigError

Pattern = regex.Pattern
IGNORECASE = regex.IGNORECASE
Match = type(regex.match("", ""))

_compiled: dict[tuple[str, int], Any] = {}

#: A pattern made of these characters, or of such words between `|`, matches exactly itself
#: (one of its words): it is tested by comparing texts and never compiled. Most conditions of
#: the default configs are such words (`pytorch`, `training`, `server|max_qps`), and
#: compiling each cost `dlbs plan` about half a million instructions at start-up.
_WORD_CHARACTERS = string.ascii_letters + string.digits + "_"


def _words(text: str) -> list[str] | None:
    """The words `text` matches exactly, when it is words between `|`; else None."""
    words = text.split("|")
    return words if all(not word.strip(_WORD_CHARACTERS) for word in words) else None


def _checked_text(text: Any) -> None:
    if not isinstance(text, str):
        raise ConfigError(f"a regular expression is a string, not {text!r}")
    if len(text) > MAX_STRING:
        raise ConfigError(f"regular expression of {len(text):,} characters is longer than "
                          f"{MAX_STRING:,}")


def compile_pattern(text: str, flags: int = 0) -> Any:
    """The compiled `text` (cached); ConfigError with the reason when it is not valid."""
    key = (text, flags)
    pattern = _compiled.get(key)
    if pattern is None:
        _checked_text(text)
        try:
            pattern = regex.compile(text, flags)
        except (regex.error, ValueError, OverflowError, RecursionError) as error:
            raise ConfigError(f"invalid regular expression {short(text, 60)}: "
                              f"{_reason(error)}") from None
        _compiled[key] = pattern
    return pattern


def check_pattern(text: Any) -> None:
    """ConfigError with the reason when `text` is not a valid regular expression.

    As `compile_pattern`, without compiling words (see `_WORD_CHARACTERS`), always valid.
    """
    _checked_text(text)
    if _words(text) is None:
        compile_pattern(text)


def fullmatch(pattern: Any, text: str, timeout: float = EXPRESSION_SECONDS) -> Any:
    """`pattern.fullmatch(text)` within `timeout` seconds, else ConfigError."""
    try:
        return pattern.fullmatch(text, timeout=timeout)
    except TimeoutError:
        raise too_slow(pattern, text, timeout) from None


# A sweep tests the same few values against the same conditions thousands of times.
_groups: dict[tuple[str, str], tuple[str, ...] | None] = {}
_GROUPS_KEPT = 65_536


def fullmatch_groups(pattern: str, text: str) -> tuple[str, ...] | None:
    """The whole match and the groups (unmatched: "") when `pattern` matches all of `text`."""
    key = (pattern, text)
    try:
        return _groups[key]
    except KeyError:
        pass
    _checked_text(pattern)
    words = _words(pattern)
    if words is not None:  # no groups: the whole match is the text
        groups: tuple[str, ...] | None = (text,) if text in words else None
    else:
        match = fullmatch(compile_pattern(pattern), text)
        groups = None if match is None else tuple(
            group or "" for group in (match.group(0), *match.groups()))
    if len(_groups) >= _GROUPS_KEPT:
        _groups.clear()
    _groups[key] = groups
    return groups


def too_slow(pattern: Any, text: str, timeout: float) -> ConfigError:
    return ConfigError(f"regular expression {short(pattern.pattern, 60)} took more than "
                       f"{timeout:g} s on a text of {len(text):,} characters",
                       hint="simplify the pattern: nested repeats such as (a+)+ or (a|aa)+ "
                            "backtrack without end")


def _reason(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
