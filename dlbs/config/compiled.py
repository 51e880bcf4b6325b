"""Expressions parsed once per template instead of once per experiment.

The text of a `$( ... )$` is its template's literal pieces with the rendered values of its
references ("holes") in between, so a sweep makes a new text, and once parsed a new syntax
tree, for each experiment. Most references sit inside a string literal
(`'${exp.log_file}'`): there a value changes one string constant of the tree and nothing
else, provided it cannot end the literal or start an escape (no quote, backslash, line
break, NUL or lone surrogate). Such a value is filled into the constant of a tree parsed
once. A reference in code position (`${exp.num_gpus} > 0`) shapes the tree itself: its
text is part of the key the tree is kept under (a sweep gives it few values: numbers,
booleans).

A tree is used only where it is the tree of the whole text: every filled hole found exactly
once, in a plain string constant (not an f-string's, not bytes), with no backslash just
before it. Anything else takes the text path, which stays the reference: the caller
evaluates the whole text whenever `Compiler.tree` says None, and whenever a filled
evaluation fails, so that errors name the text as before.
"""

from __future__ import annotations

import ast
import functools
import re
import warnings
from typing import Any

# A hole's stand-in while a template is parsed: an identifier in code, plain text in a string.
_MARK = "_dlbs_hole_"
_HOLE = re.compile(_MARK + r"(\d+)_")


def safe_to_fill(value: str) -> bool:
    """Whether `value` may fill a string constant of a tree.

    A filled value may not hold what ends a literal or starts an escape, a character that
    makes the text path fail (NUL, a lone surrogate), nor the stand-in itself.
    """
    if value.isascii():  # the common case: a few scans at C speed, no pattern to run
        return not ("'" in value or '"' in value or "\\" in value or "\n" in value or
                    "\r" in value or "\x00" in value or _MARK in value)
    return _unsafe().search(value) is None


@functools.cache
def _unsafe() -> re.Pattern[str]:
    # Compiled for the first value that is not ASCII: a lone surrogate's range makes `re`
    # build large tables, millions of instructions that most plans never need.
    return re.compile("['\"\\\\\n\r\x00\ud800-\udfff]|" + _MARK)


_TREES_KEPT = 4096  # trees per template: code holes with that many values take the text path


UNKNOWN = object()  # `Tree.answer` of values not evaluated before
_ANSWERS_KEPT = 4096  # answers per tree: past that they are forgotten and found again


class _Read:
    """A step of the answers: the filled constant the evaluation read next, by its text."""

    __slots__ = ("constant", "next")

    def __init__(self, constant: ast.Constant) -> None:
        self.constant = constant
        self.next: dict[str, Any] = {}


class _Answer:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Tree:
    """A parsed expression, the string constants its holes fill, and the answers it gave.

    An evaluation reads a hole's value only through its constant, so its result depends on
    the texts of the constants it read, in the order it read them, and on nothing else:
    `'${a}' if '${b}' != 'none' else ''` with b `none` never reads a. The answers are kept by
    those texts (a tree of reads), so a value that changes in every experiment costs no
    evaluation where the expression does not read it.
    """

    __slots__ = ("body", "fills", "_answers", "_kept")

    def __init__(self, body: ast.expr, fills: dict[ast.Constant, tuple[str | int, ...]]) -> None:
        self.body = body
        # constant -> its pieces: literal text, or the index of the hole whose value goes there
        self.fills = fills
        self._answers: Any = UNKNOWN
        self._kept = 0

    def answer(self, holes: list[str]) -> Any:
        """What an evaluation with `holes` gave before, or UNKNOWN."""
        step = self._answers
        while type(step) is _Read:
            step = step.next.get(fill(self.fills[step.constant], holes), UNKNOWN)
        return step.value if type(step) is _Answer else UNKNOWN

    def remember(self, reads: dict[ast.Constant, str], value: Any) -> None:
        """Keep `value`, the result of an evaluation that read `reads` (in that order)."""
        if self._kept >= _ANSWERS_KEPT:
            self._answers, self._kept = UNKNOWN, 0
        order = list(reads.items())
        if self._answers is UNKNOWN:
            self._answers = _Read(order[0][0]) if order else _Answer(value)
            if not order:
                self._kept += 1
                return
        step = self._answers
        for index, (constant, text) in enumerate(order):
            if type(step) is not _Read or step.constant is not constant:
                return  # cannot happen for a deterministic evaluation: keep nothing
            following = step.next.get(text)
            if index == len(order) - 1:
                if following is None:
                    step.next[text] = _Answer(value)
                    self._kept += 1
                return
            if following is None:
                following = step.next[text] = _Read(order[index + 1][0])
            step = following


class _Template:
    """What one template's literal pieces allow: which holes can be filled, and its trees."""

    __slots__ = ("literals", "fillable", "trees")

    def __init__(self, literals: tuple[str, ...]) -> None:
        self.literals = literals
        self.fillable = _fillable_holes(literals)
        self.trees: dict[tuple[str | None, ...], Tree | None] = {}


class Compiler:
    """Trees of expression templates, each parsed once per distinct code-hole text."""

    def __init__(self) -> None:
        self._templates: dict[tuple[str, ...], _Template] = {}

    def tree(self, literals: tuple[str, ...], holes: list[str]) -> Tree | None:
        """The tree of `literals` with `holes` between them, or None: take the text path."""
        template = self._templates.get(literals)
        if template is None:
            template = self._templates[literals] = _Template(literals)
        fillable = template.fillable
        if not fillable:
            return None
        key = tuple(None if index in fillable and safe_to_fill(value) else value
                    for index, value in enumerate(holes))
        try:
            return template.trees[key]
        except KeyError:
            pass
        if any(value is not None and _MARK in value for value in key):
            return None
        tree = _parse_filled(literals, key)
        if len(template.trees) >= _TREES_KEPT:
            template.trees.clear()
        template.trees[key] = tree
        return tree


def _fillable_holes(literals: tuple[str, ...]) -> frozenset[int]:
    """The holes that sit inside a plain string constant when every hole is a stand-in."""
    if len(literals) < 2 or any(_MARK in piece for piece in literals):
        return frozenset()
    tree = _parse_filled(literals, (None,) * (len(literals) - 1))
    if tree is None:
        return frozenset()
    return frozenset(piece for pieces in tree.fills.values() for piece in pieces
                     if type(piece) is int)


def _parse_filled(literals: tuple[str, ...], key: tuple[str | None, ...]) -> Tree | None:
    """Parse the text with the None holes as stand-ins; None unless each is one constant's."""
    pieces = [literals[0]]
    for index, value in enumerate(key):
        pieces.append(f"{_MARK}{index}_" if value is None else value)
        pieces.append(literals[index + 1])
    text = "".join(pieces)
    for index, value in enumerate(key):
        # After a backslash a value would change the escape (`\${a}`, or `\1${a}`, where a
        # digit continues the octal escape): only the text says what it becomes.
        at = text.find(f"{_MARK}{index}_") if value is None else -1
        if at >= 0 and "\\" in text[max(at - 4, 0):at]:
            return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # as the text path: invalid escapes are Python's
            body = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    wanted = {index for index, value in enumerate(key) if value is None}
    fills: dict[ast.Constant, tuple[str | int, ...]] = {}
    seen: list[int] = []
    in_fstring: set[int] = set()
    for node in ast.walk(body):
        if isinstance(node, ast.JoinedStr):
            in_fstring.update(id(child) for child in ast.walk(node))
        for _, value in ast.iter_fields(node):
            if isinstance(value, str):
                if _MARK not in value:
                    continue
            elif not isinstance(value, bytes) or _MARK.encode() not in value:
                continue
            if not isinstance(node, ast.Constant) or not isinstance(value, str) or \
                    id(node) in in_fstring:
                return None  # a stand-in in a name, an attribute, bytes or an f-string
            pieces = _pieces(value)
            seen.extend(piece for piece in pieces if type(piece) is int)
            fills[node] = pieces
    if sorted(seen) != sorted(wanted):
        return None  # a stand-in lost (in a comment) or repeated
    return Tree(body, fills)


def _pieces(value: str) -> tuple[str | int, ...]:
    pieces: list[str | int] = []
    position = 0
    for match in _HOLE.finditer(value):
        if match.start() > position:
            pieces.append(value[position:match.start()])
        pieces.append(int(match.group(1)))
        position = match.end()
    if position < len(value):
        pieces.append(value[position:])
    return tuple(pieces)


def fill(pieces: tuple[str | int, ...], holes: list[str]) -> str:
    """The text of a filled constant."""
    return "".join(piece if type(piece) is str else holes[piece] for piece in pieces)


def text_of(literals: tuple[str, ...], holes: list[str]) -> str:
    """The expression's whole text (the text path)."""
    parts = [literals[0]]
    for index, value in enumerate(holes):
        parts.append(value)
        parts.append(literals[index + 1])
    return "".join(parts)

