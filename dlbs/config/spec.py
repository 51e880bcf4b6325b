"""The data model of a spec: parameter definitions, sweep axes and extensions."""

from __future__ import annotations

from typing import Any

from dlbs.util.records import Record


class ParamDef(Record):
    """One parameter as the merged layers define it."""

    __slots__ = ("name", "value", "source", "type", "desc", "choices", "regex", "host",
                 "minimum", "maximum", "when_set")

    def __init__(self, name: str, value: Any, source: str, type: str | None = None,
                 desc: str = "", choices: list[Any] | None = None, regex: Any = None,
                 host: bool = False, minimum: int | float | None = None,
                 maximum: int | float | None = None, when_set: bool = False) -> None:
        self.name = name
        self.value = value
        self.source = source
        self.type = type
        self.desc = desc
        self.choices = choices
        self.regex = regex  # a compiled pattern of dlbs.config.patterns
        # The value describes the host (interpreter, cache path) or how to run (exp.rerun,
        # exp.timeout), not what is measured: it is left out of exp.id, so that the
        # experiment keeps its id on another machine and under another run policy. Spec keys:
        # `host: true` or `identity: false`.
        self.host = host
        # The range of a number (spec keys `min` and `max`), both ends included.
        self.minimum = minimum
        self.maximum = maximum
        # In exp.id only when its value is not null (spec key `identity: when_set`): a
        # parameter added with a null default leaves the ids of the experiments that do not
        # set it as they were.
        self.when_set = when_set

    def definition(self) -> dict[str, Any]:
        """The definition as a spec object (for `print-config` and `help`)."""
        out: dict[str, Any] = {"val": self.value}
        if self.type:
            out["type"] = self.type
        if self.desc:
            out["desc"] = self.desc
        if self.choices is not None:
            out["choices"] = self.choices
        if self.regex is not None:
            out["regex"] = self.regex.pattern
        if self.minimum is not None:
            out["min"] = self.minimum
        if self.maximum is not None:
            out["max"] = self.maximum
        if self.host:
            out["host"] = True
        if self.when_set:
            out["identity"] = "when_set"
        return out


class Axis(Record):
    """One sweep axis: a parameter's values, or objects that set several keys together."""

    __slots__ = ("name", "items", "source", "zipped")

    def __init__(self, name: str, items: list[Any], source: str, zipped: bool = False) -> None:
        self.name = name
        self.items = items
        self.source = source
        self.zipped = zipped


class Extension(Record):
    """A conditional: when every test holds, set `parameters` (once per case).

    An extension with an `error` sets nothing: it is a rule that refuses every finished
    experiment its condition matches, with that message (docs/language.md section 7).
    """

    __slots__ = ("condition", "parameters", "cases", "source", "error")

    def __init__(self, condition: dict[str, Any], parameters: dict[str, Any],
                 cases: list[dict[str, Any]], source: str, error: str | None = None) -> None:
        self.condition = condition
        self.parameters = parameters
        self.cases = cases
        self.source = source
        self.error = error


class Spec(Record):
    """Everything the layers (defaults, includes, the user's file, the CLI) define, merged."""

    __slots__ = ("params", "axes", "extensions", "files", "own_namespaces")

    def __init__(self, params: dict[str, ParamDef] | None = None,
                 axes: dict[str, Axis] | None = None, extensions: list[Extension] | None = None,
                 files: list[str] | None = None,
                 own_namespaces: frozenset[str] = frozenset()) -> None:
        self.params = {} if params is None else params
        self.axes = {} if axes is None else axes
        self.extensions = [] if extensions is None else extensions
        self.files = [] if files is None else files
        # dlbs's own namespaces: those the default configs declare names in (`exp`,
        # `runtime`, each framework's, ...); none without the default configs.
        self.own_namespaces = own_namespaces

    def to_document(self) -> dict[str, Any]:
        """The merged spec as one spec document."""
        params: dict[str, Any] = {}
        for name, definition in self.params.items():
            plain = (definition.type is None and not definition.desc and definition.choices is None
                     and definition.regex is None and not definition.host
                     and not definition.when_set
                     and definition.minimum is None and definition.maximum is None)
            params[name] = definition.value if plain and not _looks_like_definition(
                definition.value) else definition.definition()
        return {
            "parameters": params,
            "variables": {name: axis.items for name, axis in self.axes.items()},
            "extensions": [
                {"condition": ext.condition, "error": ext.error} if ext.error is not None else
                {"condition": ext.condition, "parameters": ext.parameters, "cases": ext.cases}
                for ext in self.extensions
            ],
        }


DEFINITION_KEYS = ("val", "type", "desc", "choices", "regex", "val_domain", "val_regex", "host",
                   "identity", "min", "max")


def _looks_like_definition(value: Any) -> bool:
    return isinstance(value, dict) and "val" in value
