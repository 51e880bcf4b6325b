"""The one reading of yes/no words: `true/yes/on/1/t/y` and `false/no/off/0/f/n`, any case.

The backends read their boolean flags with the same words (python/benchmark_common/flags.py,
which cannot import dlbs); tests/unit/test_backend_boundary.py keeps the two lists equal.
"""

from __future__ import annotations

TRUE_WORDS = ("true", "yes", "on", "1", "t", "y")
FALSE_WORDS = ("false", "no", "off", "0", "f", "n")
#: The words as an error message lists them: true/false/yes/no/...
WORDS_TEXT = "/".join(word for pair in zip(TRUE_WORDS, FALSE_WORDS) for word in pair)


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
