"""The one reading of yes/no words: `true/yes/on/1` and `false/no/off/0`, any case."""

from __future__ import annotations

TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
FALSE_WORDS = frozenset({"false", "no", "off", "0"})


def parse_bool(text: str) -> bool | None:
    """True or False for a yes/no word (surrounding blanks ignored), None for anything else."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


def truthy(value: object) -> bool:
    """A parameter's value as a switch: strings by `parse_bool` (other text is false)."""
    if isinstance(value, str):
        return bool(parse_bool(value))
    return bool(value)
