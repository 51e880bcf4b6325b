"""The sandboxed evaluator behind `$( ... )$`: simpleeval with a short whitelist and budgets.

Never `eval`: simpleeval walks the AST and refuses imports, dunder attributes and string
`format`. We add the names that docs/language.md section 5 promises and nothing else, and
bound every evaluation (docs/security.md): its time (the clock is read at every step, the
budget being the thread's CPU time; regular expressions stop at the same deadline), the bytes
its values add up to, and the size of whatever runs in C, checked before it runs
(`guarded.py`).
"""

from __future__ import annotations

import ast
import math
import sys
import time
import warnings
from types import SimpleNamespace
from typing import Any

import simpleeval

from dlbs.config import compiled, guarded, patterns
from dlbs.config.guarded import OverBudget
from dlbs.config.limits import (
    EXPRESSION_BYTES,
    EXPRESSION_SECONDS,
    MAX_INT_BITS,
    MAX_ITEMS,
    MAX_SHARED_TEXT,
    MAX_STRING,
    MAX_VALUE_CHARS,
)
from dlbs.errors import ConfigError

_BUILTINS = {name: getattr(__builtins__, name) if not isinstance(__builtins__, dict)
             else __builtins__[name]
             for name in ("len", "int", "float", "bool", "min", "max", "abs", "sorted", "any",
                          "all", "list", "dict")}
_FUNCTIONS = {**_BUILTINS, "range": guarded.checked_range, "sum": guarded.checked_sum,
              "str": guarded.checked_str, "round": guarded.checked_round}
_CONSTANTS = {"true": True, "false": False, "null": None,
              "True": True, "False": False, "None": None}
_MATH = SimpleNamespace(**{name: guarded.MATH_CHECKED.get(name, getattr(math, name))
                           for name in dir(math)
                           if not name.startswith("_") and name not in guarded.MATH_LEFT_OUT})
_OS = SimpleNamespace(path=SimpleNamespace(**guarded.os_path()))
_OPERATORS = dict(simpleeval.DEFAULT_OPERATORS)
_OPERATORS.update({getattr(ast, name): function
                   for name, function in guarded.OPERATORS_CHECKED.items()})
# Nodes whose value is new (and so counts against the byte budget); a name, a constant or an
# attribute hands back a value that exists already.
_MAKES_VALUES = (ast.BinOp, ast.UnaryOp, ast.Call, ast.Subscript, ast.JoinedStr, ast.List,
                 ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.GeneratorExp, ast.DictComp)
_OBJECT_BYTES = 64  # what one value costs at the least (sys.getsizeof of a small object)
_RESULTS_KEPT = 65_536  # results remembered: a sweep repeats few texts, or each just once


#: How an expression that is no Python expression is refused (the start of the message).
SYNTAX_ERROR = "invalid expression syntax"


class _BudgetExceeded(Exception):
    """The clock or the byte count of one evaluation ran out."""


class _TextPathOnly(Exception):
    """A compiled tree cannot give this evaluation's answer: evaluate the text instead."""


class _Evaluator(simpleeval.EvalWithCompoundTypes):
    """simpleeval, with the budgets read at every step and attributes on a whitelist."""

    def __init__(self) -> None:
        names = dict(_CONSTANTS)
        names.update(re=self._regex_module(), math=_MATH, os=_OS)
        super().__init__(operators=dict(_OPERATORS), functions=dict(_FUNCTIONS), names=names)
        self.deadline = 0.0
        self.cpu_start = 0.0
        self.spent = 0
        self.sizes = guarded.SharedSizes(MAX_SHARED_TEXT)
        # Of a compiled tree: its string constants that take hole values, the values, and
        # the filled constants read, in order, with their text.
        self.fills: dict[ast.Constant, tuple[str | int, ...]] = {}
        self.holes: list[str] = []
        self.reads: dict[ast.Constant, str] = {}

    def start(self) -> None:
        self.deadline = time.perf_counter() + EXPRESSION_SECONDS
        self.cpu_start = time.thread_time()
        self.spent = 0
        self.sizes = guarded.SharedSizes(MAX_SHARED_TEXT)
        self._max_count = 0

    # -- budgets -----------------------------------------------------------------------------
    def _eval(self, node: ast.AST) -> Any:
        if time.perf_counter() > self.deadline:
            self._past_the_clock()
        result = super()._eval(node)
        if isinstance(node, _MAKES_VALUES):
            self._count(result)
        return result

    def _check_disallowed_items(self, item: Any) -> None:
        """The check simpleeval makes of every value, each container walked once.

        simpleeval walks every item of every result, a list held at several places at each
        time: `[[0] * 99999] * 99999` took minutes. Here that walk also sizes the value
        (`SharedSizes`), and a value too large to walk in C is refused as soon as it is made.
        """
        if type(item) not in guarded.CONTAINERS:
            super()._check_disallowed_items(item)
            return
        size = self.sizes.size(item, super()._check_disallowed_items)
        if size > MAX_SHARED_TEXT:
            raise OverBudget(f"a {type(item).__name__} of more than {MAX_SHARED_TEXT:,} "
                             f"characters as text, a value it holds several times counted "
                             f"each time")

    def _count(self, value: Any) -> None:
        kind = type(value)
        if kind is str:
            if len(value) > MAX_STRING:
                raise OverBudget(f"a string of {len(value):,} characters (at most "
                                 f"{MAX_STRING:,})")
            self.spent += _OBJECT_BYTES + len(value)
        elif kind is int:
            if value.bit_length() > MAX_INT_BITS:
                raise OverBudget(f"a number of {value.bit_length():,} bits (at most "
                                 f"{MAX_INT_BITS:,})")
            self.spent += _OBJECT_BYTES
        elif kind in (list, tuple, dict, set, frozenset):
            if len(value) > MAX_ITEMS:
                raise OverBudget(f"a {kind.__name__} of {len(value):,} items (at most "
                                 f"{MAX_ITEMS:,})")
            # The container and, at the least, a new object per item.
            self.spent += sys.getsizeof(value) + _OBJECT_BYTES * len(value)
        else:
            self.spent += _OBJECT_BYTES
        if self.spent > EXPRESSION_BYTES:
            raise _BudgetExceeded(f"made values of more than {EXPRESSION_BYTES // 2**20} MB")

    def _eval_constant(self, node: ast.Constant) -> Any:
        pieces = self.fills.get(node) if self.fills else None
        if pieces is None:
            return super()._eval_constant(node)
        text = compiled.fill(pieces, self.holes)
        if len(text) > simpleeval.MAX_STRING_LENGTH:
            raise _TextPathOnly  # the text path says how long, as it always has
        self.reads.setdefault(node, text)
        return text

    def remaining(self) -> float:
        return max(self.deadline - time.perf_counter(), 0.001)

    def _past_the_clock(self) -> None:
        """The budget is the evaluating thread's CPU time; the wall clock only says when to look.

        On a loaded machine the thread may wait for a core longer than the budget while it
        computes almost nothing: a plan must not fail for that. The clock is read at every
        step (cheap); the thread's CPU time only when the wall-clock deadline has passed.
        """
        used = time.thread_time() - self.cpu_start
        if used >= EXPRESSION_SECONDS:
            raise _BudgetExceeded(f"took more than {EXPRESSION_SECONDS:g} s")
        self.deadline = time.perf_counter() + (EXPRESSION_SECONDS - used)

    # -- nodes whose work depends on sizes ---------------------------------------------------
    def _eval_list(self, node: ast.List) -> list[Any]:
        result: list[Any] = []
        for item in node.elts:
            if isinstance(item, ast.Starred):
                items = self._eval(item.value)
                guarded.check_length(len(result) + len(items), result, "the list")
                result.extend(items)
            else:
                result.append(self._eval(item))
        return result

    def _eval_joinedstr(self, node: ast.JoinedStr) -> str:
        pieces, length = [], 0
        for part in node.values:
            value = self._eval(part)
            guarded.check_text(value, "the f-string")
            text = str(value)
            length += len(text)
            guarded.check_length(length, text, "the f-string")
            pieces.append(text)
        return "".join(pieces)

    def _eval_formattedvalue(self, node: ast.FormattedValue) -> Any:
        value = self._eval(node.value)
        if node.conversion != -1:  # !s, !r, !a
            value = guarded.converted(value, chr(node.conversion))
        if node.format_spec:
            spec = self._eval(node.format_spec)
            guarded.check_format_spec(spec)
            guarded.check_text(value, "the f-string")
            return ("{:" + spec + "}").format(value)
        return value

    def _eval_attribute(self, node: ast.Attribute) -> Any:
        name = node.attr
        if name.startswith("_") or name in simpleeval.DISALLOW_METHODS:
            raise simpleeval.FeatureNotAvailable(f"attribute {name!r}")
        owner = self._eval(node.value)
        if isinstance(owner, SimpleNamespace):  # re, math, os, os.path: curated above
            try:
                return getattr(owner, name)
            except AttributeError:
                raise simpleeval.AttributeDoesNotExist(name, self.expr) from None
        kind = type(owner)
        allowed = guarded.ATTRIBUTES.get(kind, frozenset())
        if name not in allowed:
            raise simpleeval.FeatureNotAvailable(f"'.{name}' of a {kind.__name__}")
        bind = guarded.CHECKED_METHODS.get((kind, name))
        return bind(owner) if bind is not None else getattr(owner, name)

    # -- re.* --------------------------------------------------------------------------------
    def _regex_module(self) -> SimpleNamespace:
        """`re.*` through the `regex` package, stopped at this evaluation's deadline."""
        def compiled(pattern: Any, flags: int) -> Any:
            if not isinstance(pattern, str):
                raise TypeError(f"a pattern is a string, not {type(pattern).__name__}")
            return patterns.compile_pattern(pattern, flags)

        def text(string: Any) -> str:
            if not isinstance(string, str):
                raise TypeError(f"a regular expression searches a string, not "
                                f"{type(string).__name__}")
            return string

        def matcher(method: str) -> Any:
            def call(pattern: Any, string: Any, flags: int = 0) -> guarded.Match | None:
                regex = compiled(pattern, flags)
                try:
                    found = getattr(regex, method)(text(string), timeout=self.remaining())
                except TimeoutError:
                    raise patterns.too_slow(regex, string, EXPRESSION_SECONDS) from None
                return None if found is None else guarded.Match(found)
            return call

        def collect(regex: Any, string: str, pieces: Any) -> list[Any]:
            """The pieces of a findall or split, counted as they come, never all at once."""
            result: list[Any] = []
            try:
                for piece in pieces:
                    self._count(piece)
                    result.append(piece)
                    guarded.check_length(len(result), result, "the result")
                    if time.perf_counter() > self.deadline:
                        self._past_the_clock()
            except TimeoutError:
                raise patterns.too_slow(regex, string, EXPRESSION_SECONDS) from None
            return result

        def findall(pattern: Any, string: Any, flags: int = 0) -> list[Any]:
            regex = compiled(pattern, flags)
            string = text(string)

            def found() -> Any:
                for match in regex.finditer(string, timeout=self.remaining()):
                    if regex.groups == 0:
                        yield match.group(0)
                        continue
                    groups = guarded.Match(match).groups("")
                    yield groups[0] if regex.groups == 1 else groups
            return collect(regex, string, found())

        def split(pattern: Any, string: Any, maxsplit: int = 0, flags: int = 0) -> list[Any]:
            regex = compiled(pattern, flags)
            string = text(string)
            return collect(regex, string, regex.splititer(string, maxsplit,
                                                          timeout=self.remaining()))

        def sub(pattern: Any, repl: Any, string: Any, count: int = 0, flags: int = 0) -> str:
            regex = compiled(pattern, flags)
            if not isinstance(repl, str) or not isinstance(string, str):
                raise TypeError("re.sub takes a pattern, a replacement and a string")
            made = [len(string)]
            references = repl.count("\\")  # `\1`, `\g<name>`: each may repeat a group

            def replace(match: Any) -> str:
                if references:  # sized before `expand` builds it in C
                    longest = max(len(group or "") for group in (match.group(0),
                                                                  *match.groups()))
                    guarded.check_length(made[0] + len(repl) + references * longest, repl,
                                         "re.sub()'s result")
                text = match.expand(repl)
                made[0] += len(text)  # at most the whole input and every replacement
                guarded.check_length(made[0], text, "re.sub()'s result")
                return text
            try:
                return regex.sub(replace, string, count=count, timeout=self.remaining())
            except TimeoutError:
                raise patterns.too_slow(regex, string, EXPRESSION_SECONDS) from None

        return SimpleNamespace(sub=sub, findall=findall, split=split, **{
            name: matcher(name) for name in ("match", "search", "fullmatch")})


class SafeEvaluator:
    """Evaluates expression text; results are cached because sweeps repeat the same text."""

    def __init__(self) -> None:
        self._evaluator = _Evaluator()
        self._results: dict[str, Any] = {}
        self._compiler = compiled.Compiler()

    def evaluate(self, text: str) -> Any:
        try:
            return self._results[text]
        except KeyError:
            pass
        return self._keep(text, self._evaluate(text))

    def evaluate_parts(self, literals: tuple[str, ...], holes: list[str]) -> Any:
        """The value of the text `literals[0] + holes[0] + literals[1] + ...`.

        What `evaluate` of that text gives, errors included; the text is parsed once per
        template where the holes only fill string literals, and an answer is kept by the
        values it read (`compiled.py`).
        """
        length = sum(map(len, literals)) + sum(map(len, holes))
        tree = self._compiler.tree(literals, holes) if length <= MAX_STRING else None
        if tree is None:
            return self.evaluate(compiled.text_of(literals, holes))
        known = tree.answer(holes)
        if known is not compiled.UNKNOWN:
            return known
        evaluator = self._evaluator
        evaluator.fills, evaluator.holes, evaluator.reads = tree.fills, holes, {}
        reads = evaluator.reads
        try:
            evaluator.start()
            result = evaluator._eval(tree.body)
        except Exception:  # noqa: BLE001 - the text path makes the error, naming the text
            return self.evaluate(compiled.text_of(literals, holes))
        finally:
            evaluator.fills, evaluator.holes, evaluator.reads = {}, [], {}
        result = self._checked(result)
        tree.remember(reads, result)
        return result

    def _checked(self, result: Any) -> Any:
        """An expression's result as plain data, or ConfigError; as every evaluation's is."""
        if callable(result) or isinstance(result, SimpleNamespace):
            raise ConfigError("expression does not compute a value (a function or module)")
        # A list may hold one long string many times at little cost; its text may not.
        if self._evaluator.sizes.size(result) > MAX_VALUE_CHARS:
            raise ConfigError(f"expression exceeds a size limit: its value would be more than "
                              f"{MAX_VALUE_CHARS:,} characters as text")
        return _plain(result)

    def _keep(self, text: str, result: Any) -> Any:
        result = self._checked(result)
        if len(self._results) >= _RESULTS_KEPT:  # texts unique to each experiment (exp.id)
            self._results.clear()
        self._results[text] = result
        return result

    def _evaluate(self, text: str) -> Any:
        evaluator = self._evaluator
        if len(text) > MAX_STRING:
            raise ConfigError(f"expression exceeds a size limit: its text has {len(text):,} "
                              f"characters (at most {MAX_STRING:,})")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escapes in strings: Python's call
                tree = ast.parse(text.strip(), mode="eval")
            evaluator.expr = text
            evaluator.start()
            return evaluator._eval(tree.body)
        except (simpleeval.FeatureNotAvailable, simpleeval.FunctionNotDefined,
                simpleeval.AttributeDoesNotExist, simpleeval.OperatorNotDefined) as error:
            raise ConfigError(f"not allowed in an expression: {_reason(error)}") from None
        except (simpleeval.IterableTooLong, simpleeval.NumberTooHigh, OverBudget) as error:
            raise ConfigError(f"expression exceeds a size limit: {_reason(error)}") from None
        except _BudgetExceeded as error:
            raise ConfigError(f"expression exceeds its budget: it {error}",
                              hint="docs/security.md lists the budgets of an expression") \
                from None
        except simpleeval.NameNotDefined as error:
            raise ConfigError(f"unknown name in expression: {_reason(error)}",
                              hint="strings from references are substituted as they are: "
                                   "quote them, as in '${exp.model}'") from None
        except SyntaxError as error:
            raise ConfigError(f"{SYNTAX_ERROR} ({error.msg})") from None
        except (RecursionError, MemoryError):
            raise ConfigError("expression is nested too deeply") from None
        except ConfigError:
            raise
        except Exception as error:  # noqa: BLE001 - any evaluation failure is the spec's
            raise ConfigError(f"expression failed: {type(error).__name__}: "
                              f"{_reason(error)}") from None


def _plain(value: Any) -> Any:
    """Tuples become lists, as JSON has only lists; anything else is checked later."""
    kind = type(value)
    if kind is tuple or kind is list:
        return [_plain(item) for item in value]
    if kind is dict:
        return {key: _plain(item) for key, item in value.items()}
    return value


def _reason(error: Exception) -> str:
    # simpleeval appends "for expression '...'"; the caller names the expression itself.
    text = str(error)
    cut = text.find(" for expression ")
    text = text if cut < 0 else text[:cut].rstrip(",")
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."
