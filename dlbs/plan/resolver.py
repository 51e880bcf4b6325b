"""Resolve the parameters of one experiment: references, expressions, casts and checks.

An experiment is the spec's base parameters plus `overrides` (from sweep axes and
extensions). Resolved values are memoised in a table shared by the whole plan, keyed by the
name, the framework and the overrides that the name can reach (see `graph.py`), so each
distinct value is computed once however many experiments share it.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from dlbs.config.evaluator import SYNTAX_ERROR, SafeEvaluator
from dlbs.config.limits import MAX_ITEMS, MAX_VALUE_CHARS
from dlbs.config.loader import suggest
from dlbs.config.patterns import fullmatch
from dlbs.config.spec import ParamDef
from dlbs.config.template import Expr, Part, Ref, Template, parse
from dlbs.config.values import cast, check_plain, normalise, render, shell_word
from dlbs.errors import ConfigError
from dlbs.plan.graph import Pattern, matching
from dlbs.util.records import FrozenRecord, Record

# A run of a string's parts: (its memo key, or None: made each time), the parts, their inputs.
Run = tuple[object | None, tuple[Part, ...], tuple[str, ...]]
StringInfo = tuple[Template, tuple[str, ...], bool, list[Run] | None]
Segment = tuple[object | None, tuple[Any, ...], frozenset[str] | None]
LastList = tuple[Mapping[str, Any], list[tuple[list[Any], bool, bool]], list[Any], bool,
                 tuple[int, ...]]


class Override(FrozenRecord):
    """A raw value that a sweep axis or an extension gives one experiment."""

    __slots__ = ("raw", "token", "source", "label")

    def __init__(self, raw: Any, token: Hashable, source: str, label: str | None = None) -> None:
        self.raw = raw
        # Equal tokens mean equal raw values: the memo key of every dependent parameter.
        self.token = token
        self.source = source
        # Shown in error messages to say which experiment of the sweep failed.
        self.label = label


class Resolved(Record):
    """A resolved value, and whether it comes from the host."""

    __slots__ = ("value", "host")

    def __init__(self, value: Any, host: bool) -> None:
        self.value = value
        # The value comes from the host (environment, interpreter, caches): kept out of
        # exp.id.
        self.host = host


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
        # Per name: `kind` (one lookup for every reference to it).
        self.kinds: dict[str, tuple[tuple[str, ...] | None, bool]] = {}
        self.deps = deps
        self.frameworks = frameworks
        self.env = env
        self.evaluator = SafeEvaluator()
        self.memo: dict[tuple[Any, ...], Resolved] = {}
        self._strings: dict[str, StringInfo] = {}
        self._definitions: dict[tuple[str, str | None], ParamDef | None] = {}
        self._lists: dict[int, tuple[list[Any], list[Segment]]] = {}
        # (id of a list, framework) -> the overrides it was last resolved for, per segment
        # its values, whether one spliced a list in, and `host`; the list made, whether a
        # segment was `host`, and where each segment starts in the list.
        self.last_lists: dict[tuple[int, str | None], LastList] = {}
        # (id of a list, changed inputs) -> the positions of the segments they may change.
        self._stale_segments: dict[tuple[int, frozenset[str]], tuple[int, ...]] = {}
        # parameter -> environment variables its value was taken from (for `dlbs validate`).
        self.env_used: dict[str, set[str]] = {}

    def string(self, raw: str) -> StringInfo:
        """A string's parsed template, the varying names it can depend on, `shared`, runs."""
        try:
            return self._strings[raw]
        except KeyError:
            pass
        template = parse(raw)
        deps = self._reached(template.static_refs, template.patterns)
        shared = self.shared(deps)
        found = self._strings[raw] = (template, deps, shared,
                                      None if shared else self._runs(template))
        return found

    def _reached(self, names: Iterable[str], patterns: Iterable[Pattern] = ()) -> tuple[str, ...]:
        names = set(names)
        if patterns:
            names |= matching(patterns, self.deps)
        reached: set[str] = set()
        for name in names:
            reached.update(self.deps.get(name, ()))
        return tuple(sorted(reached))

    def _runs(self, template: Template) -> list[Run] | None:
        """The parts of a string that differs in every experiment, in runs that may not.

        `${exp.log_dir}/${exp.model}_${exp.id}.log` is new in each experiment, but all that
        comes before `${exp.id}` is shared: that run's text is kept as values are, by the
        inputs it reaches, and the rest is made each time. None: nothing worth keeping.
        """
        names = [_part_names(part) for part in template.parts]
        if template.single is not None or None in names:
            return None
        runs: list[Run] = []
        run: list[Part] = []
        run_names: list[str] = []
        for part, read in (*zip(template.parts, names), (None, ())):
            deps = self._reached(read) if read else ()
            if part is not None and self.shared(deps):
                run.append(part)
                run_names += read
                continue
            if run:
                run_deps = self._reached(run_names)
                # An expression is kept with the text around it (`log_file`'s scenario test).
                kept = sum(not isinstance(p, str) for p in run) > 1 or any(
                    isinstance(p, Expr) for p in run)
                if kept and self.shared(run_deps):
                    runs.append((object(), tuple(run), run_deps))
                else:
                    runs.extend((None, (p,), ()) for p in run)
                run, run_names = [], []
            if part is not None:
                runs.append((None, (part,), ()))
        return runs if any(key is not None for key, _, _ in runs) else None

    def list_segments(self, raw: list[Any]) -> list[Segment]:
        """A list's items in segments, each (a memo key or None, its items, their inputs).

        Items that no sweep changes make runs, each with a memo key and no inputs; any other
        item is a segment of its own, with the inputs it reaches (None: unknown).
        """
        found = self._lists.get(id(raw))
        if found is not None and found[0] is raw:
            return found[1]
        segments: list[Segment] = []
        run: list[str] = []
        for item in raw:
            inputs = self._inputs(item)
            if inputs is not None and not inputs:
                run.append(item)
                continue
            if run:
                segments.append((object(), tuple(run), frozenset()))
                run = []
            segments.append((None, (item,), inputs))
        if run:
            segments.append((object(), tuple(run), frozenset()))
        self._lists[id(raw)] = (raw, segments)  # holding `raw` keeps its id its own
        return segments

    def stale_segments(self, raw: list[Any], segments: list[Segment],
                       changed: frozenset[str]) -> tuple[int, ...]:
        """The positions of `raw`'s segments (`list_segments`) that `changed` inputs reach."""
        key = (id(raw), changed)  # `list_segments` holds `raw`: its id stays its own
        found = self._stale_segments.get(key)
        if found is None:
            if len(self._stale_segments) >= _STALE_SEGMENTS_KEPT:
                self._stale_segments.clear()
            found = self._stale_segments[key] = tuple(
                index for index, (_, _, inputs) in enumerate(segments)
                if inputs is None or not inputs.isdisjoint(changed))
        return found

    def _inputs(self, item: Any) -> frozenset[str] | None:
        """The sweep inputs a list item reaches; None for anything but a string."""
        if not isinstance(item, str):
            return None
        if "$" not in item:
            return frozenset()
        try:
            return frozenset(self.string(item)[1])
        except ConfigError:
            return None  # reported when its turn comes, after the items before it

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

    def kind(self, name: str) -> tuple[tuple[str, ...] | None, bool]:
        """The sweep inputs `name` reaches (None: not a parameter), and whether kept.

        Its values are kept in `memo` when they can repeat (`shared` of those inputs).
        """
        deps = self.deps.get(name)
        found = self.kinds[name] = (deps, deps is not None and self.shared(deps))
        return found

    def definition(self, name: str, framework: str | None) -> ParamDef | None:
        """The definition of `name` that experiments of `framework` see, if any."""
        key = (name, framework)
        try:
            return self._definitions[key]
        except KeyError:
            pass
        definition = self.params.get(name)
        if definition is not None and not self.visible(name, framework):
            definition = None
        self._definitions[key] = definition
        return definition

    def visible(self, name: str, framework: str | None) -> bool:
        """False for names in the namespace of a framework other than the experiment's."""
        prefix = name.partition(".")[0]
        return prefix not in self.frameworks or prefix == framework


_STALE_SEGMENTS_KEPT = 4096  # (list, changed inputs) pairs remembered: a sweep has a few

#: A character that ends or escapes the quotes an expression puts a value in.
_BREAKS_QUOTES = re.compile("['\"\\\\\n\r]")


def _breaks_quotes(value: str) -> bool:
    """`_BREAKS_QUOTES.search(value)`, a few times faster: values are most often paths."""
    return "'" in value or '"' in value or "\\" in value or "\n" in value or "\r" in value


def _part_names(part: Part) -> tuple[str, ...] | None:
    """The names a part of a string reads; None when one of them is computed (`${${a}}`)."""
    if isinstance(part, str):
        return ()
    if isinstance(part, Ref):
        return (part.name,) if isinstance(part.name, str) else None
    names = tuple(ref.name for ref in part.refs)
    return names if all(isinstance(name, str) for name in names) else None


def _located(error: ConfigError) -> bool:
    return getattr(error, "located", False)


class Resolver:
    """Resolves names for one experiment (one set of overrides)."""

    __slots__ = ("ctx", "_overrides", "_tokens", "_framework", "_stack", "_host", "_local",
                 "since")

    def __init__(self, ctx: ResolutionContext, overrides: Mapping[str, Override],
                 framework: str | None = None) -> None:
        self.ctx = ctx
        self._framework = framework
        self.overrides = overrides
        self._stack: list[str] = []
        self._host = False
        # (the overrides of the experiment before, the inputs that changed since): lists
        # keep the segments whose inputs did not change. Set by the planner.
        self.since: tuple[Mapping[str, Override], frozenset[str]] | None = None

    @property
    def overrides(self) -> Mapping[str, Override]:
        return self._overrides

    @overrides.setter
    def overrides(self, overrides: Mapping[str, Override]) -> None:
        self._overrides = overrides
        self._tokens = {name: override.token for name, override in overrides.items()}
        # Values of this experiment alone (they depend on exp.id, or on every axis): kept for
        # the references that repeat them, until an override changes.
        self._local: dict[str, Resolved] = {}

    def add(self, name: str, override: Override) -> None:
        """One more override (the planner's exp.id), leaving the mapping given before as it is."""
        overrides = dict(self._overrides)
        overrides[name] = override
        tokens = self._tokens.copy()
        tokens[name] = override.token
        self._overrides, self._tokens, self._local = overrides, tokens, {}

    @property
    def framework(self) -> str | None:
        return self._framework

    @framework.setter
    def framework(self, framework: str | None) -> None:
        self._framework = framework
        self._local = {}

    # -- public ------------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        if name in self._overrides:
            return True
        return name in self.ctx.params and self.ctx.visible(name, self._framework)

    def value(self, name: str) -> Any:
        return self.entry(name).value

    def tokens(self, names: tuple[str, ...]) -> tuple[Hashable, ...]:
        """The overrides' tokens of `names` (None where not overridden): equal, same inputs."""
        return tuple(map(self._tokens.get, names))

    def entry(self, name: str) -> Resolved:
        ctx = self.ctx
        try:
            deps, shared = ctx.kinds[name]
        except KeyError:
            deps, shared = ctx.kind(name)
        key = None  # from the environment: each referrer is recorded (env_used)
        if deps is not None:
            if shared:
                key = (name, self._framework, *map(self._tokens.get, deps))
                hit = ctx.memo.get(key)
            else:  # this experiment's alone: no key to make
                hit = self._local.get(name)
            if hit is not None:
                if hit.host:
                    self._host = True
                return hit
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
        if key is not None:
            ctx.memo[key] = entry
        elif deps is not None:
            self._local[name] = entry
        self._host = outer_host or entry.host
        return entry

    def describe(self) -> str:
        """The sweep values that identify this experiment, for error messages."""
        labels = [o.label for o in self._overrides.values() if o.label]
        return ", ".join(labels)

    # -- resolution --------------------------------------------------------------------------
    def _compute(self, name: str) -> Any:
        override = self._overrides.get(name)
        definition = self.ctx.definition(name, self._framework)
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
            candidates = [n for n in self.ctx.params if self.ctx.visible(n, self._framework)]
            candidates += list(self._overrides)
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
            template, deps, shared, runs = self.ctx.string(raw)
            if shared:
                key = (raw, list_item, self._framework, *map(self._tokens.get, deps))
                hit = self.ctx.memo.get(key)
            else:  # different in every experiment: never kept, so never looked up
                hit = None
            if hit is None:
                outer_host, self._host = self._host, False
                value = self._render(template, list_item) if runs is None else \
                    self._render_runs(runs, list_item)
                hit = Resolved(value, self._host)
                if shared:
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
        out: list[str] = []
        self._render_parts(template.parts, list_item, out, 0)
        return "".join(out)

    def _render_parts(self, parts: tuple[Part, ...], list_item: bool, out: list[str],
                      length: int) -> int:
        """Append the texts of `parts` to `out`; returns the length of all of `out`."""
        for part in parts:
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
                raise _too_long()
            out.append(text)
        return length

    def _render_runs(self, runs: list[Run], list_item: bool) -> str:
        """`_render` of a string's runs (ResolutionContext._runs): kept ones are looked up."""
        out: list[str] = []
        length = 0
        memo = self.ctx.memo
        for run, parts, deps in runs:
            if run is None:
                length = self._render_parts(parts, list_item, out, length)
                continue
            key = (run, list_item, self._framework, *map(self._tokens.get, deps))
            hit = memo.get(key)
            if hit is None:
                outer_host, self._host = self._host, False
                start = len(out)
                length = self._render_parts(parts, list_item, out, length)
                memo[key] = Resolved("".join(out[start:]), self._host)
                self._host = outer_host or self._host
                continue
            # The text grows part by part: past the limit at its end, past it inside.
            length += len(hit.value)
            if length > MAX_VALUE_CHARS:
                raise _too_long()
            out.append(hit.value)
            self._host = self._host or hit.host
        return "".join(out)

    def _resolve_list(self, raw: list[Any]) -> list[Any]:
        out: list[Any] = []
        memo = self.ctx.memo
        segments = self.ctx.list_segments(raw)
        # The last experiment's segments of this list, when `since` says what changed since.
        key = (id(raw), self._framework)
        last = self.ctx.last_lists.get(key)
        changed = self.since[1] if self.since is not None and last is not None and \
            last[0] is self.since[0] else None
        if changed is not None:
            patched = self._patched_list(raw, segments, key, last, changed)  # type: ignore[arg-type]
            if patched is not None:
                return patched
        made: list[tuple[list[Any], bool, bool]] = []
        for index, (run, items, inputs) in enumerate(segments):
            if changed is not None and inputs is not None and inputs.isdisjoint(changed):
                segment = last[1][index]
                # A spliced list is checked against what comes before it: replay when it can fail.
                if not segment[1] or len(out) + len(segment[0]) <= MAX_ITEMS:
                    out.extend(segment[0])
                    self._host = self._host or segment[2]
                    made.append(segment)
                    continue
            outer_host, self._host = self._host, False
            start = len(out)
            if run is None:
                spliced = self._resolve_items(items, out)
            else:  # items that no sweep changes (most of an argument list): once per plan
                hit = memo.get((run, self._framework))
                if hit is not None and (not hit.value[1] or
                                        len(out) + len(hit.value[0]) <= MAX_ITEMS):
                    out.extend(hit.value[0])
                    spliced = hit.value[1]
                    self._host = hit.host
                else:
                    spliced = self._resolve_items(items, out)
                    memo[(run, self._framework)] = Resolved((out[start:], spliced), self._host)
            made.append((out[start:], spliced, self._host))
            self._host = outer_host or self._host
        starts = []
        start = 0
        for values, _, _ in made:
            starts.append(start)
            start += len(values)
        self.ctx.last_lists[key] = (self._overrides, made, out,
                                    any(host for _, _, host in made), tuple(starts))
        return out

    def _patched_list(self, raw: list[Any], segments: list[Segment],
                      key: tuple[int, str | None], last: LastList,
                      changed: frozenset[str]) -> list[Any] | None:
        """`_resolve_list` of the experiment after `last`'s, when only `changed` changed.

        The list of the last experiment, its segments that `changed` reaches resolved anew
        and put in place: most of an argument list is the same from one experiment to the
        next. None (resolve the whole list) when a segment made anew has another number of
        items, which `_resolve_list` handles. Otherwise every item keeps its place, so a
        spliced segment kept has the items before it that passed its check.
        """
        _, last_made, last_out, host_any, starts = last
        out = last_out.copy()
        made = last_made.copy()
        recount = False
        for index in self.ctx.stale_segments(raw, segments, changed):
            start = starts[index]
            outer_host, self._host = self._host, False
            values: list[Any] = []
            spliced = self._resolve_items(segments[index][1], values)
            host, self._host = self._host, outer_host
            # Spliced items were checked against the items before them in the segment; with
            # every item in its place, they are within a list no longer than the last.
            if len(values) != len(last_made[index][0]) or spliced and len(out) > MAX_ITEMS:
                return None
            out[start:start + len(values)] = values
            recount = recount or host or last_made[index][2]
            made[index] = (values, spliced, host)
        if recount:
            host_any = any(host for _, _, host in made)
        if host_any:
            self._host = True
        self.ctx.last_lists[key] = (self._overrides, made, out, host_any, starts)
        return out

    def _resolve_items(self, items: tuple[Any, ...], out: list[Any]) -> bool:
        """Append the values of list items to `out`; True if one of them spliced a list in."""
        spliced = False
        for item in items:
            if isinstance(item, str):
                if "$" not in item:  # literal text, the common item: as _resolve returns it
                    if item:
                        out.append(item)
                    continue
                value = self._resolve(item, list_item=True)
                if isinstance(value, list):
                    if len(out) + len(value) > MAX_ITEMS:
                        raise ConfigError(f"the list would have more than {MAX_ITEMS:,} items")
                    out.extend(value)  # `"${exp.docker_args}"` splices the list in place
                    spliced = True
                    continue
                if value is None or value == "":
                    continue  # a conditional argument that is off
            else:
                value = self._resolve(item, list_item=False)
            out.append(value)
        return spliced

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
        literals = expr.literals
        holes = []
        length = 0
        # Texts that may break the string literal an expression puts them in: ('${a}').
        breaking: list[tuple[Ref, str]] = []
        # The evaluator refuses a text this long anyway: never build it, and say so at the
        # first piece that makes it too long, as the text is made from left to right.
        for index, ref in enumerate(expr.refs):
            length += len(literals[index])
            if length > MAX_VALUE_CHARS:
                raise _expression_too_long()
            value = self._ref(ref)
            piece = render(value, null="null")
            if isinstance(value, str) and _breaks_quotes(value):
                breaking.append((ref, value))
            length += len(piece)
            if length > MAX_VALUE_CHARS:
                raise _expression_too_long()
            holes.append(piece)
        if length + len(literals[-1]) > MAX_VALUE_CHARS:
            raise _expression_too_long()
        try:
            return self.ctx.evaluator.evaluate_parts(literals, holes)
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


def _too_long() -> ConfigError:
    return ConfigError(f"the value would be more than {MAX_VALUE_CHARS:,} characters long")


def _expression_too_long() -> ConfigError:
    return ConfigError(f"expression exceeds a size limit: its text would be more than "
                       f"{MAX_VALUE_CHARS:,} characters")


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
