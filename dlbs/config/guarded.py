"""The operations an expression may use, each with its sizes checked before the work is done.

Padding a string, repeating a list, a power, a factorial or `%` formatting run in C: once
started, nothing stops them, so the size of their result is computed from their arguments
first and refused above the limits of `dlbs.config.limits` (docs/security.md). Whatever
runs in Python between these steps is stopped by the evaluator's clock.

Each refusal raises `OverBudget`; the evaluator turns it into one error naming the parameter.
"""

from __future__ import annotations

import itertools
import math
import operator
import os.path
import re
from collections.abc import Callable, Iterable
from typing import Any

from dlbs.config.limits import MAX_INT_BITS, MAX_ITEMS, MAX_STRING


class OverBudget(Exception):
    """An expression asked for more than a limit allows; the message says what and which."""


# -- sizes -----------------------------------------------------------------------------------
def limit_of(value: Any) -> int:
    """How long a sequence like `value` may be: characters for strings, items otherwise."""
    return MAX_STRING if isinstance(value, str | bytes) else MAX_ITEMS


def check_length(length: int, like: Any, what: str) -> None:
    """Refuse a sequence like `like` (a string: characters; else items) `length` long."""
    limit = limit_of(like)
    if length > limit:
        unit = "characters" if isinstance(like, str | bytes) else "items"
        raise OverBudget(f"{what} would have {length:,} {unit} (at most {limit:,})")


def check_bits(bits: int, what: str) -> None:
    if bits > MAX_INT_BITS:
        raise OverBudget(f"{what} would have about {bits:,} bits (at most {MAX_INT_BITS:,})")


#: The containers whose items an expression can reach; their sizes are walked.
CONTAINERS = (list, tuple, dict, set, frozenset)


class SharedSizes:
    """Upper estimates of `len(str(value))`, a value held at several places counted at each.

    `[[0] * 99999] * 99999` is two small lists in memory, but 10**10 items to everything
    that walks it in C (`==`, `max`, `sorted`, `in`, `str`), where no clock can stop it. Its
    size as text, each place counted, is what bounds that work. Each container is walked
    once (its size is remembered, with a reference that keeps its id from being reused), so
    sizing what an evaluation makes costs no more than making it did. A size is counted no
    further than just past `limit`: above it, `limit + 1`.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._known: dict[int, tuple[Any, int]] = {}

    def size(self, value: Any, check_leaf: Callable[[Any], None] | None = None) -> int:
        """The size of `value`; `check_leaf` sees every item that is no plain value."""
        kind = type(value)
        if kind is str:
            return len(value) + 2
        if kind not in CONTAINERS:
            return _scalar_size(value, check_leaf)
        known = self._known.get(id(value))
        if known is not None:
            return known[1]
        if kind is dict:
            total = 2 + 4 * len(value)
            items: Iterable[Any] = itertools.chain(value.keys(), value.values()) \
                if total <= self.limit else ()
        else:
            total = 2 + 2 * len(value)
            items = value if total <= self.limit else ()
        for item in items:
            item_kind = type(item)
            if item_kind is str:
                total += len(item) + 2
            elif item_kind is int:
                total += item.bit_length() * 10 // 33 + 2
            else:
                total += self.size(item, check_leaf)
            if total > self.limit:
                break
        total = min(total, self.limit + 1)
        self._known[id(value)] = (value, total)
        return total


def _scalar_size(value: Any, check_leaf: Callable[[Any], None] | None) -> int:
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, int):
        return value.bit_length() * 10 // 33 + 2
    if isinstance(value, float | complex):
        return 50
    if isinstance(value, range):
        return 40
    if check_leaf is not None:
        check_leaf(value)
    return 100


def text_size(value: Any, limit: int = MAX_STRING) -> int:
    """An upper estimate of `len(str(value))`, counting no further than just past `limit`."""
    return SharedSizes(limit).size(value)


def check_text(value: Any, what: str) -> None:
    """Refuse to turn `value` into text when the text would be too long."""
    if not isinstance(value, str) and text_size(value) > MAX_STRING:
        raise OverBudget(f"{what} would be more than {MAX_STRING:,} characters")


# -- operators -------------------------------------------------------------------------------
def _is_int(value: Any) -> bool:
    return isinstance(value, int)


def _is_sequence(value: Any) -> bool:
    return isinstance(value, str | bytes | list | tuple)


def add(left: Any, right: Any) -> Any:
    if _is_sequence(left) and _is_sequence(right):
        check_length(len(left) + len(right), left, "the sum")
    return left + right


def multiply(left: Any, right: Any) -> Any:
    if _is_sequence(left) and _is_int(right):
        check_length(len(left) * right, left, "the repeat")
    elif _is_sequence(right) and _is_int(left):
        check_length(len(right) * left, right, "the repeat")
    return left * right


def power(base: Any, exponent: Any) -> Any:
    if _is_int(base) and _is_int(exponent) and exponent > 0 and abs(base) > 1:
        check_bits((abs(base).bit_length() - 1) * exponent + 1, f"{_short(base)} ** "
                                                                f"{_short(exponent)}")
    return base**exponent


def left_shift(value: Any, shift: Any) -> Any:
    if _is_int(value) and _is_int(shift) and value and shift > 0:
        check_bits(abs(value).bit_length() + shift, f"{_short(value)} << {_short(shift)}")
    return value << shift


# `%` conversions: `%(key)` then flags, width and precision, either of them `*`.
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d*))?")


def modulo(left: Any, right: Any) -> Any:
    if isinstance(left, str):
        for match in _PERCENT.finditer(left):
            for number in match.groups():
                if number == "*":
                    raise OverBudget("'*' widths in % formatting are not supported; write "
                                     "the width itself")
                if number and (len(number) > 6 or int(number) > MAX_STRING):
                    raise OverBudget(f"% formatting with a width of {number[:12]} would make "
                                     f"more than {MAX_STRING:,} characters")
        check_text(right, "the text of the % formatting")
    return left % right


OPERATORS_CHECKED: dict[str, Callable[[Any, Any], Any]] = {
    "Add": add, "Mult": multiply, "Pow": power, "LShift": left_shift, "Mod": modulo,
    "RShift": operator.rshift,
}


#: An f-string's `!s`, `!r` and `!a`.
CONVERSIONS: dict[str, Callable[[Any], str]] = {"s": str, "r": repr, "a": ascii}


def converted(value: Any, conversion: str) -> str:
    """`value` as an f-string's `!s`, `!r` or `!a` gives it, its text's size checked first.

    `!a` writes one character as up to 10 (a backslash, U and 8 digits): checked again.
    """
    check_text(value, f"the !{conversion} conversion")
    text = CONVERSIONS[conversion](value)
    check_length(len(text), text, f"the !{conversion} conversion")
    return text


def check_format_spec(spec: str) -> None:
    """An f-string's `{x:>1000000000}`: widths and precisions within the string limit."""
    for number in re.findall(r"\d+", spec):
        if len(number) > 6 or int(number) > MAX_STRING:
            raise OverBudget(f"the format {spec[:20]!r} would make more than {MAX_STRING:,} "
                             f"characters")


# -- functions -------------------------------------------------------------------------------
def checked_range(*args: Any) -> range:
    result = range(*args)
    try:
        length = len(result)
    except OverflowError:
        length = MAX_ITEMS + 1
    if length > MAX_ITEMS:
        raise OverBudget(f"range of {_short(length)} items (at most {MAX_ITEMS:,})")
    return result


def checked_sum(iterable: Iterable[Any], start: Any = 0) -> Any:
    items = list(iterable)
    check_length(len(items), items, "sum's input")
    if _is_sequence(start) or any(_is_sequence(item) for item in items):
        length = sum(len(item) for item in (start, *items) if _is_sequence(item))
        check_length(length, start if _is_sequence(start) else items[0], "the sum")
    return sum(items, start)


def checked_round(number: Any, ndigits: Any = None) -> Any:
    """`round(n, -10**18)` of an integer computes 10**(10**18) first."""
    if _is_int(number) and _is_int(ndigits) and ndigits < 0:
        check_bits(-ndigits * 10 // 3 + 1, f"round(..., {_short(ndigits)})")
    return round(number, ndigits) if ndigits is not None else round(number)


def checked_str(*args: Any) -> str:
    if args:
        check_text(args[0], "str()")
    return str(*args)


def _lgamma_bits(n: float) -> int:
    return int(math.lgamma(n + 1) / math.log(2)) + 1 if n > 1 else 1


def checked_factorial(n: Any) -> int:
    if _is_int(n) and n > 1:
        check_bits(_lgamma_bits(n), f"factorial({_short(n)})")
    return math.factorial(n)


def checked_comb(n: Any, k: Any) -> int:
    if _is_int(n) and _is_int(k) and 0 < k < n:
        check_bits(min(k, n - k) * max(n.bit_length(), 1), f"comb({_short(n)}, {_short(k)})")
    return math.comb(n, k)


def checked_perm(n: Any, k: Any = None) -> int:
    if k is None:
        return checked_factorial(n)
    if _is_int(n) and _is_int(k) and 0 < k <= n:
        check_bits(k * max(n.bit_length(), 1), f"perm({_short(n)}, {_short(k)})")
    return math.perm(n, k)


def _int_bits(values: Iterable[Any]) -> int:
    return sum(abs(v).bit_length() for v in values if _is_int(v))


def checked_prod(iterable: Iterable[Any], *, start: Any = 1) -> Any:
    items = list(iterable)
    check_length(len(items), items, "prod's input")
    check_bits(_int_bits([start, *items]), "the product")
    if _is_sequence(start) or any(_is_sequence(item) for item in items):
        raise OverBudget("prod() of strings or lists is not supported")
    return math.prod(items, start=start)


def checked_lcm(*integers: Any) -> int:
    check_bits(_int_bits(integers), "the lcm")
    return math.lcm(*integers)


MATH_CHECKED: dict[str, Callable[..., Any]] = {
    "factorial": checked_factorial, "comb": checked_comb, "perm": checked_perm,
    "prod": checked_prod, "lcm": checked_lcm,
}
# Functions of `math` that are slow or large only through their integer arguments' size, which
# the checks above cover; `sumprod` (3.12) is left out.
MATH_LEFT_OUT = frozenset({"sumprod"})


def os_path() -> dict[str, Callable[..., Any]]:
    return {"join": os.path.join, "basename": os.path.basename, "dirname": os.path.dirname}


# -- methods ---------------------------------------------------------------------------------
def _pad(method: str) -> Callable[[str], Callable[..., str]]:
    def bind(text: str) -> Callable[..., str]:
        def call(width: Any, *rest: Any) -> str:
            if _is_int(width):
                check_length(width, text, f"str.{method}()")
            return getattr(text, method)(width, *rest)
        return call
    return bind


def _replace(text: str) -> Callable[..., str]:
    def call(old: Any, new: Any, count: Any = -1) -> str:
        if isinstance(old, str) and isinstance(new, str) and _is_int(count):
            found = text.count(old) if old else len(text) + 1
            if count >= 0:
                found = min(found, count)
            check_length(len(text) + found * (len(new) - len(old)), text, "str.replace()")
        return text.replace(old, new, count)
    return call


def _expandtabs(text: str) -> Callable[..., str]:
    def call(tabsize: Any = 8) -> str:
        if _is_int(tabsize):
            check_length(len(text) + text.count("\t") * max(tabsize, 0), text,
                         "str.expandtabs()")
        return text.expandtabs(tabsize)
    return call


def _join(separator: str) -> Callable[[Iterable[Any]], str]:
    def call(iterable: Iterable[Any]) -> str:
        items = list(iterable)
        length = sum(len(item) for item in items if isinstance(item, str))
        check_length(length + len(separator) * max(len(items) - 1, 0), separator,
                     "str.join()")
        return separator.join(items)
    return call


_STR_READ = frozenset({
    "capitalize", "casefold", "count", "endswith", "find", "index", "isalnum", "isalpha",
    "isascii", "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric", "isprintable",
    "isspace", "istitle", "isupper", "lower", "lstrip", "partition", "removeprefix",
    "removesuffix", "rfind", "rindex", "rpartition", "rsplit", "rstrip", "split",
    "splitlines", "startswith", "strip", "swapcase", "title", "upper"})
_STR_CHECKED: dict[str, Callable[[str], Callable[..., Any]]] = {
    "center": _pad("center"), "ljust": _pad("ljust"), "rjust": _pad("rjust"),
    "zfill": _pad("zfill"), "replace": _replace, "expandtabs": _expandtabs, "join": _join}
_NUMBER = frozenset({"real", "imag", "conjugate", "as_integer_ratio"})
_SET = frozenset({"copy", "union", "intersection", "difference", "symmetric_difference",
                  "issubset", "issuperset", "isdisjoint"})

#: Per type: the attributes an expression may read (methods that change nothing, or build
#: something of a checked size). Mutating methods (append, extend, update) are left out:
#: an expression computes a value, and a list extended with itself doubles at C speed.
ATTRIBUTES: dict[type, frozenset[str]] = {
    str: _STR_READ | frozenset(_STR_CHECKED),
    list: frozenset({"count", "index", "copy"}),
    tuple: frozenset({"count", "index"}),
    dict: frozenset({"get", "keys", "values", "items", "copy"}),
    set: _SET,
    frozenset: _SET,
    int: _NUMBER | {"bit_length", "bit_count", "numerator", "denominator"},
    bool: _NUMBER | {"bit_length", "bit_count", "numerator", "denominator"},
    float: _NUMBER | {"is_integer", "hex"},
}
#: Bound methods that check their arguments first, by (type, attribute).
CHECKED_METHODS: dict[tuple[type, str], Callable[[Any], Callable[..., Any]]] = {
    (str, name): bind for name, bind in _STR_CHECKED.items()}


class Match:
    """A regex match as expressions see it: its groups are sized before they are made.

    A pattern of many nested groups matched against a long text has groups that each hold
    most of the text; `groups()` would copy every one of them in C. Here the spans are added
    up first. No `expand`: its template could repeat a group at will.
    """

    __slots__ = ("_match",)

    def __init__(self, match: Any) -> None:
        self._match = match

    def _sized(self, indices: Iterable[Any]) -> None:
        length = 0
        for index in indices:
            start, end = self._match.span(index)
            length += max(end - start, 0)
        check_length(length, "", "the match's groups")

    def group(self, *indices: Any) -> Any:
        self._sized(indices or (0,))
        return self._match.group(*indices)

    def groups(self, default: Any = None) -> tuple[Any, ...]:
        self._sized(range(1, self._match.re.groups + 1))
        return self._match.groups(default)

    def groupdict(self, default: Any = None) -> dict[str, Any]:
        self._sized(self._match.re.groupindex.values())
        return self._match.groupdict(default)

    def start(self, group: Any = 0) -> int:
        return self._match.start(group)

    def end(self, group: Any = 0) -> int:
        return self._match.end(group)

    def span(self, group: Any = 0) -> tuple[int, int]:
        return self._match.span(group)

    @property
    def lastindex(self) -> int | None:
        return self._match.lastindex

    @property
    def lastgroup(self) -> str | None:
        return self._match.lastgroup


ATTRIBUTES[Match] = frozenset({"group", "groups", "groupdict", "start", "end", "span",
                               "lastindex", "lastgroup"})


def _short(value: Any) -> str:
    if _is_int(value) and abs(value).bit_length() > 64:
        return f"a {abs(value).bit_length()}-bit number"
    return f"{value:,}" if _is_int(value) else repr(value)

