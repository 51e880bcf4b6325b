"""Resolve the parameters of one experiment: references, expressions, casts and checks.

An experiment is the spec's base parameters plus `overrides` (from sweep axes and
extensions). Resolved values are memoised in a table shared by the whole plan, keyed by the
name, the framework and the overrides that the name can reach (see `graph.py`), so each
distinct value is computed once however many experiments share it.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from dlbs.config.evaluator import SYNTAX_ERROR, SafeEvaluator
from dlbs.config.limits import MAX_ITEMS, MAX_VALUE_CHARS
from dlbs.config.loader import suggest
from dlbs.config.patterns import fullmatch
from dlbs.config.spec import ParamDef
from dlbs.config.template import Expr, Ref, Template, parse
from dlbs.config.values import cast, check_plain, normalise, render, shell_word
from dlbs.errors import ConfigError
from dlbs.plan.graph import matching


@dataclass(frozen=True, slots=True)
class Override:
    """A raw value that a sweep axis or an extension gives one experiment."""

    raw: Any
    # Equal tokens mean equal raw values: the memo key of every dependent parameter.
    token: Hashable
    source: str
    # Shown in error messages to say which experiment of the sweep failed.
    label: str | None = None


@dataclass(slots=True)
class Resolved:
    value: Any
    # The value comes from the host (environment, interpreter, caches): kept out of exp.id.
    host: bool


class ResolutionContext:
    """What every experiment of one plan shares: the base parameters and the memo table."""

    def __init__(self, params: Mapping[str, ParamDef], deps: Mapping[str, tuple[str, ...]],
                 frameworks: frozenset[str], env: Mapping[str, str],
                 axis_keys: list[frozenset[str]] | None = None,
                 per_experiment: frozenset[str] = frozenset()) -> None:
        self.params = params
        self.axis_keys = axis_keys or []
        self.per_experiment = per_experiment
        self._unique: dict[tuple[str, ...], bool] = {}
        self.deps = deps
        self.frameworks = frameworks
        self.env = env
        self.evaluator = SafeEvaluator()
        self.memo: dict[tuple[Any, ...], Resolved] = {}
        self._template_deps: dict[str, tuple[str, ...] | None] = {}
        # parameter -> environment variables its value was taken from (for `dlbs validate`).
        self.env_used: dict[str, set[str]] = {}

    def template_deps(self, raw: str, template: Template) -> tuple[str, ...]:
        """The varying names a string's value can depend on."""
        try:
            return self._template_deps[raw]
        except KeyError:
            pass
        names = set(template.static_refs)
        if template.patterns:
            names |= matching(template.patterns, self.deps)
        reached: set[str] = set()
        for name in names:
            reached.update(self.deps.get(name, ()))
        deps = tuple(sorted(reached))
        self._template_deps[raw] = deps
        return deps

    def shared(self, deps: tuple[str, ...]) -> bool:
        """Whether values depending on `deps` can repeat between experiments.

        A value that reaches every axis of the sweep, or a name set anew for each experiment
        (exp.id), is different in every experiment; memoising it would only make memory grow
        with the plan.
        """
        try:
            return self._unique[deps]
        except KeyError:
            names = set(deps)
            shared = not (names & self.per_experiment) and (
                not self.axis_keys or not all(keys & names for keys in self.axis_keys))
            self._unique[deps] = shared
            return shared

    def visible(self, name: str, framework: str | None) -> bool:
        """False for names in the namespace of a framework other than the experiment's."""
        prefix = name.partition(".")[0]
        return prefix not in self.frameworks or prefix == framework


#: A character that ends or escapes the quotes an expression puts a value in.
_BREAKS_QUOTES = re.compile("['\"\\\\\n\r]")


def _located(error: ConfigError) -> bool:
    return getattr(error, "located", False)


class Resolver:
    """Resolves names for one experiment (one set of overrides)."""

    __slots__ = ("ctx", "_overrides", "_tokens", "framework", "_stack", "_host")

    def __init__(self, ctx: ResolutionContext, overrides: Mapping[str, Override],
                 framework: str | None = None) -> None:
        self.ctx = ctx
        self.overrides = overrides
        self.framework = framework
        self._stack: list[str] = []
        self._host = False

    @property
    def overrides(self) -> Mapping[str, Override]:
        return self._overrides

    @overrides.setter
    def overrides(self, overrides: Mapping[str, Override]) -> None:
        self._overrides = overrides
        self._tokens = {name: override.token for name, override in overrides.items()}

    # -- public ------------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        if name in self.overrides:
            return True
        return name in self.ctx.params and self.ctx.visible(name, self.framework)

    def value(self, name: str) -> Any:
        return self.entry(name).value

    def entry(self, name: str) -> Resolved:
        ctx = self.ctx
        deps = ctx.deps.get(name)
        if deps is not None:
            key = (name, self.framework, *map(self._tokens.get, deps))
            hit = ctx.memo.get(key)
            if hit is not None:
                self._host = self._host or hit.host
                return hit
        else:
            key = None
        if name in self._stack:
            cycle = " -> ".join([*self._stack[self._stack.index(name):], name])
            raise self._error(self._stack[-1], f"cycle: {cycle}")
        outer_host, self._host = self._host, False
        self._stack.append(name)
        try:
            value = check_plain(self._compute(name))
        except ConfigError as error:
            if _located(error):
                raise
            raise self._error(name, error.message, error.hint) from None
        finally:
            self._stack.pop()
        definition = self.ctx.params.get(name)
        entry = Resolved(value, self._host or (definition is not None and definition.host))
        if key is not None and ctx.shared(deps):
            ctx.memo[key] = entry
        self._host = outer_host or entry.host
        return entry

    def describe(self) -> str:
        """The sweep values that identify this experiment, for error messages."""
        labels = [o.label for o in self.overrides.values() if o.label]
        return ", ".join(labels)

    # -- resolution --------------------------------------------------------------------------
    def _compute(self, name: str) -> Any:
        override = self.overrides.get(name)
        definition = self.ctx.params.get(name)
        if definition is not None and not self.ctx.visible(name, self.framework):
            definition = None
        if override is not None:
            raw = override.raw
        elif definition is not None:
            raw = definition.value
        else:
            return self._from_environment(name)
        # A string for a declared list is split into words later: keep substituted values
        # one word each, as in list items.
        value = self._resolve(raw, list_item=definition is not None and definition.type == "list")
        if definition is not None:
            value = check_value(definition, value)
        return value

    def _from_environment(self, name: str) -> Any:
        env_value = self.ctx.env.get(name)
        referrer = self._stack[-2] if len(self._stack) > 1 else name
        if env_value is None:
            candidates = [n for n in self.ctx.params if self.ctx.visible(n, self.framework)]
            candidates += list(self.overrides)
            raise self._error(referrer, f"undefined name {name!r} (neither a parameter nor "
                                        f"an environment variable)",
                              suggest(name, candidates))
        self._host = True
        self.ctx.env_used.setdefault(referrer, set()).add(name)
        return env_value

    def _resolve(self, raw: Any, list_item: bool) -> Any:
        if isinstance(raw, str):
            if "$" not in raw:
                return raw
            template = parse(raw)
            deps = self.ctx.template_deps(raw, template)
            key = (raw, list_item, self.framework, *map(self._tokens.get, deps))
            hit = self.ctx.memo.get(key)
            if hit is None:
                outer_host, self._host = self._host, False
                hit = Resolved(self._render(template, list_item), self._host)
                if self.ctx.shared(deps):
                    self.ctx.memo[key] = hit
                self._host = outer_host
            self._host = self._host or hit.host
            return hit.value
        if isinstance(raw, list):
            return self._resolve_list(raw)
        if isinstance(raw, dict):
            return {key: self._resolve(item, False) for key, item in raw.items()}
        return raw

    def _render(self, template: Template, list_item: bool) -> Any:
        """The value of a parsed string: one reference or expression keeps its type."""
        single = template.single
        if isinstance(single, Ref):
            value = self._ref(single)
            if list_item and isinstance(value, str) and value:
                return shell_word(value)  # one value stays one argument
            return value
        if single is not None:
            return self._expr(single)
        out = []
        length = 0
        for part in template.parts:
            if isinstance(part, str):
                text = part
            else:
                value = self._ref(part) if isinstance(part, Ref) else self._expr(part)
                if list_item and isinstance(value, str):
                    text = shell_word(value) if value else value
                else:
                    text = render(value)
            # References may repeat long values (`${a}${a}`, `a2: ${a1}${a1}`): the length
            # is checked before the text is made, so that doubling stops at the limit.
            length += len(text)
            if length > MAX_VALUE_CHARS:
                raise ConfigError(f"the value would be more than {MAX_VALUE_CHARS:,} "
                                  f"characters long")
            out.append(text)
        return "".join(out)

    def _resolve_list(self, raw: list[Any]) -> list[Any]:
        out: list[Any] = []
        for item in raw:
            if isinstance(item, str):
                value = self._resolve(item, list_item=True)
                if isinstance(value, list):
                    if len(out) + len(value) > MAX_ITEMS:
                        raise ConfigError(f"the list would have more than {MAX_ITEMS:,} items")
                    out.extend(value)  # `"${exp.docker_args}"` splices the list in place
                    continue
                if value is None or value == "":
                    continue  # a conditional argument that is off
            else:
                value = self._resolve(item, list_item=False)
            out.append(value)
        return out

    def _ref(self, ref: Ref) -> Any:
        name = ref.name
        if isinstance(name, Template):
            name = self._render_name(name)
        return self.entry(name).value

    def _render_name(self, template: Template) -> str:
        pieces = []
        for part in template.parts:
            if isinstance(part, str):
                pieces.append(part)
            else:
                pieces.append(render(self._ref(part) if isinstance(part, Ref)
                                     else self._expr(part)))
        return "".join(pieces)

    def _expr(self, expr: Expr) -> Any:
        pieces = []
        length = 0
        # Texts that may break the string literal an expression puts them in: ('${a}').
        breaking: list[tuple[Ref, str]] = []
        for part in expr.body.parts:
            if isinstance(part, str):
                piece = part
            else:
                value = self._ref(part)
                piece = render(value, null="null")
                if isinstance(value, str) and _BREAKS_QUOTES.search(value):
                    breaking.append((part, value))
            length += len(piece)
            if length > MAX_VALUE_CHARS:  # the evaluator refuses it anyway: never build it
                raise ConfigError(f"expression exceeds a size limit: its text would be more "
                                  f"than {MAX_VALUE_CHARS:,} characters")
            pieces.append(piece)
        try:
            return self.ctx.evaluator.evaluate("".join(pieces))
        except ConfigError as error:
            if not breaking or not error.message.startswith(SYNTAX_ERROR):
                raise
            # The value broke the expression, not the expression's author: blame the value.
            ref, value = breaking[0]
            name = ref.name if isinstance(ref.name, str) else self._render_name(ref.name)
            name, value = self._origin(name, value)
            what = {"'": "a quote", '"': "a quote", "\\": "a backslash"}.get(
                _BREAKS_QUOTES.search(value).group(), "a line break")  # type: ignore[union-attr]
            raise self._error(name, f"value {_short(value)} holds {what}, which breaks an "
                                    f"expression that puts it in quotes ({error.message})",
                              hint="a value that an expression quotes (as in '${exp.model}') "
                                   "may not hold quotes, backslashes or line breaks") from None

    def _origin(self, name: str, value: str) -> tuple[str, str]:
        """The parameter that a character breaking the quotes of an expression comes from.

        `exp.log_file` holds `exp.model`'s quote: the references that carry it are followed
        down to the value that holds it itself (the user's, most often).
        """
        character = _BREAKS_QUOTES.search(value).group()  # type: ignore[union-attr]
        seen = {name}
        while True:
            override = self.overrides.get(name)
            definition = self.ctx.params.get(name)
            raw = override.raw if override is not None else (
                definition.value if definition is not None else None)
            if not isinstance(raw, str) or "$" not in raw:
                return name, value
            for reference in sorted(parse(raw).static_refs - seen):
                try:
                    found = self.value(reference)
                except ConfigError:
                    continue
                if isinstance(found, str) and character in found:
                    name, value = reference, found
                    seen.add(name)
                    break
            else:
                return name, value

    # -- errors ------------------------------------------------------------------------------
    def _error(self, name: str, message: str, hint: str | None = None) -> ConfigError:
        override = self.overrides.get(name)
        definition = self.ctx.params.get(name)
        source = override.source if override is not None else (
            definition.source if definition is not None else "<plan>")
        text = f"{source}: parameter {name!r}: {message}"
        experiment = self.describe()
        if experiment:
            text += f" (experiment: {experiment})"
        error = ConfigError(text, hint)
        error.located = True  # type: ignore[attr-defined]
        return error


def check_value(definition: ParamDef, value: Any) -> Any:
    """`value` cast to the declared type and checked against choices, regex, min and max.

    The checks of docs/language.md section 6: every resolved value passes them, and so does
    every value of a plan file (`dlbs run --plan`). ConfigError says what failed.
    """
    if definition.type is not None:
        try:
            value = cast(value, definition.type)
        except ValueError as error:
            raise ConfigError(f"cannot cast to {definition.type}: {error}") from None
    value = normalise(definition.name, value)
    if definition.choices is not None and value is not None and not any(
            _same_value(value, choice) for choice in definition.choices):
        raise ConfigError(f"value {_short(value)} is not one of the choices "
                          f"{definition.choices!r}", suggest(str(value), map(
                              str, definition.choices)))
    if definition.regex is not None and value is not None and \
            fullmatch(definition.regex, render(value)) is None:
        raise ConfigError(f"value {_short(value)} does not match the regex "
                          f"{definition.regex.pattern!r}")
    if value is not None and (definition.minimum is not None or
                              definition.maximum is not None):
        check_range(definition, value)
    return value


def check_range(definition: ParamDef, value: Any) -> None:
    """A number within the definition's `min` and `max` (both included), else ConfigError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    minimum, maximum = definition.minimum, definition.maximum
    if minimum is not None and value < minimum:
        raise ConfigError(f"value {_short(value)} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"value {_short(value)} is above the maximum {maximum}")


def _short(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"of {value.bit_length()} bits"
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _same_value(value: Any, other: Any) -> bool:
    """Equality that keeps booleans apart from numbers (`true` is not `1`)."""
    return value == other and isinstance(value, bool) == isinstance(other, bool)
