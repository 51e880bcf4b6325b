"""The sandboxed evaluator behind `$( ... )$`: simpleeval with a short whitelist.

Never `eval`: simpleeval walks the AST and refuses imports, dunder attributes, string
formatting and oversized strings, powers and comprehensions. We add the names that
docs/language.md section 5 promises and nothing else.
"""

from __future__ import annotations

import math
import os.path
import re
from types import SimpleNamespace
from typing import Any

import simpleeval

from dlbs.errors import ConfigError

_FUNCTIONS = {
    name: getattr(__builtins__, name) if not isinstance(__builtins__, dict) else __builtins__[name]
    for name in ("len", "int", "float", "str", "bool", "min", "max", "abs", "round", "sum",
                 "range", "sorted", "any", "all", "list", "dict")
}
_NAMES = {
    "true": True, "false": False, "null": None,
    "True": True, "False": False, "None": None,
    "re": SimpleNamespace(sub=re.sub, match=re.match, search=re.search, split=re.split,
                          findall=re.findall, fullmatch=re.fullmatch),
    "math": SimpleNamespace(**{name: getattr(math, name) for name in dir(math)
                               if not name.startswith("_")}),
    "os": SimpleNamespace(path=SimpleNamespace(join=os.path.join, basename=os.path.basename,
                                               dirname=os.path.dirname)),
}


class SafeEvaluator:
    """Evaluates expression text; results are cached because sweeps repeat the same text."""

    def __init__(self) -> None:
        self._evaluator = simpleeval.EvalWithCompoundTypes(functions=dict(_FUNCTIONS),
                                                           names=dict(_NAMES))
        self._results: dict[str, Any] = {}

    def evaluate(self, text: str) -> Any:
        try:
            return self._results[text]
        except KeyError:
            pass
        try:
            result = self._evaluator.eval(text.strip())
        except (simpleeval.FeatureNotAvailable, simpleeval.FunctionNotDefined,
                simpleeval.AttributeDoesNotExist) as error:
            raise ConfigError(f"not allowed in an expression: {_reason(error)}") from None
        except (simpleeval.IterableTooLong, simpleeval.NumberTooHigh) as error:
            raise ConfigError(f"expression exceeds a size limit: {_reason(error)}") from None
        except simpleeval.NameNotDefined as error:
            raise ConfigError(f"unknown name in expression: {_reason(error)}",
                              hint="strings from references are substituted as they are: "
                                   "quote them, as in '${exp.model}'") from None
        except SyntaxError as error:
            raise ConfigError(f"invalid expression syntax ({error.msg})") from None
        except Exception as error:  # noqa: BLE001 - any evaluation failure is the spec's
            raise ConfigError(f"expression failed: {type(error).__name__}: {error}") from None
        if callable(result) or isinstance(result, SimpleNamespace):
            raise ConfigError("expression does not compute a value (a function or module)")
        self._results[text] = result
        return result


def _reason(error: Exception) -> str:
    # simpleeval appends "for expression '...'"; the caller names the expression itself.
    return re.sub(r",? for expression .*$", "", str(error), flags=re.S)
