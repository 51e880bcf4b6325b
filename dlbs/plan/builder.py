"""Turn a merged Spec into its experiments: the sweep's product, extensions, resolution, ids.

Experiments are produced one at a time (a generator) so that a plan of 100,000 streams in
flat memory. Each is a plain dict of resolved, typed, checked parameters.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from itertools import product
from pathlib import Path
from typing import Any

import orjson

from dlbs.config.limits import DEFAULT_MAX_EXPERIMENTS
from dlbs.config.patterns import fullmatch_groups
from dlbs.config.spec import Extension, ParamDef, Spec
from dlbs.config.template import escape
from dlbs.config.values import cast, render
from dlbs.errors import ConfigError, PlanError
from dlbs.plan.containment import contain
from dlbs.plan.graph import references, sweep_dependencies
from dlbs.plan.identity import ID_PARAMS, IdentitySets, default_sources, spec_set_names
from dlbs.plan.resolver import Override, ResolutionContext, Resolved, Resolver

ID = "exp.id"
FRAMEWORK = "exp.framework"
# Parameters that configure the planner itself; they are not part of any experiment.
PLANNER_PREFIX = "sys."
VAR_ORDER = "sys.plan_builder.var_order"
MAX_EXPERIMENTS = "sys.max_experiments"
GROUP_PREFIX = "__condition"
# Left out of exp.id besides host values: outputs, the id itself and where its log goes.
NOT_IN_ID = ("exp.log_file",)

_GROUP_REF = re.compile(r"(?<!\$)\$([{<])__condition\.")


class Planner:
    """Expands one Spec; iterate `experiments()` for the plan."""

    def __init__(self, spec: Spec, env: Mapping[str, str] | None = None) -> None:
        self.spec = spec
        self.params: dict[str, ParamDef] = {
            name: definition for name, definition in spec.params.items()
            if not name.startswith(PLANNER_PREFIX)}
        self.axes = self._ordered_axes(spec)
        self.extensions = [self._namespaced_groups(index, ext)
                           for index, ext in enumerate(spec.extensions)]
        # Extensions with an `error` are rules: tested on each finished experiment.
        self.rules = [(index, ext) for index, ext in enumerate(self.extensions)
                      if ext.error is not None]
        # The others add cases or parameters: their indices, in order.
        self._growing = [index for index, ext in enumerate(self.extensions) if ext.error is None]
        self._rules_by_framework: dict[str | None, list[tuple[int, Extension]]] = {}
        self.duplicates = 0
        self.count = 0
        self.max_experiments = max_experiments(spec)
        # Before anything expands: a sweep of 2**40 experiments is refused, not attempted.
        self.upper_bound = self.size_bound()
        if self.upper_bound > self.max_experiments:
            raise PlanError(f"the plan would have up to {self.upper_bound:,} experiments "
                            f"({self._size_terms()}), more than {MAX_EXPERIMENTS} "
                            f"({self.max_experiments:,})",
                            hint=f"narrow the sweep, or raise {MAX_EXPERIMENTS} if you mean it")

        # Every raw value each name may take, and the names a sweep can change.
        alternatives: dict[str, list[Any]] = {
            name: [definition.value] for name, definition in self.params.items()}
        varying: list[str] = []
        self._axis_overrides = self._axis_items(alternatives, varying)
        self._extension_overrides = self._extension_cases(alternatives, varying)
        # Regex groups of conditions are inputs too: every name under __condition@N.
        for raws in list(alternatives.values()):
            for name in _group_names(raws):
                alternatives.setdefault(name, [])
                varying.append(name)
        self.auto_id = ID in self.params and self.params[ID].value is None
        if self.auto_id:
            varying.append(ID)
        self.varying = list(dict.fromkeys(varying))
        deps = sweep_dependencies(alternatives, self.varying)
        self.post_id = frozenset(n for n, d in deps.items() if ID in d and n != ID) \
            if self.auto_id else frozenset()

        framework_def = self.params.get(FRAMEWORK)
        frameworks = frozenset(str(c) for c in (framework_def.choices or [])) \
            if framework_def is not None else frozenset()
        axis_keys = [frozenset(key for item in items for key in item)
                     for items in self._axis_overrides]
        self.ctx = ResolutionContext(self.params, deps, frameworks,
                                     host_environment() if env is None else env, axis_keys,
                                     frozenset([ID]) if self.auto_id else frozenset())
        self._layouts: dict[str | None, _Layout] = {}
        # Answers of extension and rule conditions, by the sweep inputs they test.
        self._inputs: dict[int, tuple[str, ...] | None] = {}
        self._matches: dict[tuple[Any, ...], dict[str, Override] | None] = {}
        self._seen: set[str] = set()
        # The files that passed `contain` in the experiment before (its `passed`).
        self._contained: dict[str, tuple[str, Any, str]] = {}
        # Declared `identity: when_set`: in the id only when not null (docs/language.md s. 2).
        self._when_set = frozenset(n for n, d in self.params.items() if d.when_set)
        # What identifies each experiment, stored with it (exp.id_params: identity.py).
        self.identity_sets = IdentitySets(self.params, spec_set_names(spec, default_sources()))

    # -- setup -------------------------------------------------------------------------------
    def _axis_items(self, alternatives: dict[str, list[Any]],
                    varying: list[str]) -> list[list[dict[str, Override]]]:
        """Per axis, per item: its overrides, made once and shared by every experiment."""
        per_axis = []
        for axis_index, axis in enumerate(self.axes):
            items = []
            for item_index, item in enumerate(axis.items):
                values = item if axis.zipped else {axis.name: item}
                items.append({key: Override(raw, (axis_index, item_index), axis.source,
                                            f"{key}={render(raw)}")
                              for key, raw in values.items()})
                _note_inputs(values, alternatives, varying)
            per_axis.append(items)
        return per_axis

    def _extension_cases(self, alternatives: dict[str, list[Any]],
                         varying: list[str]) -> list[list[dict[str, Override]]]:
        """Per extension, per case (one when it has none): the overrides it applies."""
        per_extension = []
        for ext_index, ext in enumerate(self.extensions):
            per_case = []
            for case_index, case in enumerate(ext.cases or [{}]):
                values = {**ext.parameters, **case}
                per_case.append({key: Override(raw, ("ext", ext_index, case_index, key),
                                               ext.source)
                                 for key, raw in values.items()})
                _note_inputs(values, alternatives, varying)
            per_extension.append(per_case)
        return per_extension

    @staticmethod
    def _ordered_axes(spec: Spec) -> list[Any]:
        axes = list(spec.axes.values())
        order_def = spec.params.get(VAR_ORDER)
        order = order_def.value if order_def is not None else None
        if not order:
            return axes
        if isinstance(order, str):
            order = [name.strip() for name in order.split(",") if name.strip()]
        if not isinstance(order, list):
            raise ConfigError(f"{order_def.source}: parameter {VAR_ORDER!r}: "
                              f"must be a list of variable names")
        by_name = {axis.name: axis for axis in axes}
        for name in order:
            if name not in by_name:
                raise ConfigError(f"{order_def.source}: parameter {VAR_ORDER!r}: "
                                  f"{name!r} is not a variable",
                                  hint=f"variables: {', '.join(by_name) or '(none)'}")
        return [by_name[n] for n in order] + [a for a in axes if a.name not in order]

    @staticmethod
    def _namespaced_groups(index: int, ext: Extension) -> Extension:
        """Give each extension's regex groups their own names, so that they never mix."""
        def rename(raw: Any) -> Any:
            if isinstance(raw, str):
                return _GROUP_REF.sub(lambda m: f"${m.group(1)}{GROUP_PREFIX}@{index}.", raw)
            if isinstance(raw, list):
                return [rename(item) for item in raw]
            if isinstance(raw, dict):
                return {key: rename(item) for key, item in raw.items()}
            return raw
        return Extension(ext.condition, rename(ext.parameters),
                         [rename(case) for case in ext.cases], ext.source, ext.error)

    def size_bound(self) -> int:
        """The most experiments the plan can have: every axis, times every extension's cases.

        An extension multiplies the experiments it matches by its cases; assuming that it
        matches all of them gives an upper bound without resolving anything.
        """
        bound = 1
        for axis in self.axes:
            bound *= len(axis.items)
        for extension in self.extensions:
            if extension.error is None:
                bound *= max(len(extension.cases), 1)
        return bound

    def _size_terms(self) -> str:
        terms = [f"{len(axis.items):,} values of {axis.name}" for axis in self.axes]
        terms += [f"{len(ext.cases):,} cases of {ext.source}" for ext in self.extensions
                  if ext.error is None and len(ext.cases) > 1]
        return " x ".join(terms) or "no axes"

    def axis_keys(self) -> list[str]:
        """The parameters the sweep's axes set, in axis order."""
        keys = (key for items in self._axis_overrides for item in items for key in item)
        return list(dict.fromkeys(keys))

    # -- the plan ----------------------------------------------------------------------------
    def experiments(self) -> Iterator[dict[str, Any]]:
        """Every experiment of the plan, in order; duplicates (same exp.id) only once."""
        ranges = [range(len(items)) for items in self._axis_overrides]
        axis_overrides = self._axis_overrides
        for combination in product(*ranges):
            overrides: dict[str, Override] = {}
            for axis_index, item_index in enumerate(combination):
                overrides.update(axis_overrides[axis_index][item_index])
            for state, resolver in self._extend(overrides, self._resolver(overrides), 0):
                self._apply_rules(state, resolver)
                experiment = self._finalize(state, resolver)
                contain(experiment, resolver.describe, self._contained)
                identity = experiment.get(ID) if self.auto_id else None
                if identity is None:
                    identity = hashlib.sha256(
                        orjson.dumps(experiment, option=orjson.OPT_SORT_KEYS)).hexdigest()
                if identity in self._seen:
                    self.duplicates += 1
                    continue
                self._seen.add(identity)
                self.count += 1
                yield experiment

    def _resolver(self, overrides: dict[str, Override]) -> Resolver:
        """The resolver of one set of overrides, its framework resolved first."""
        resolver = Resolver(self.ctx, overrides)
        resolver.framework = self._framework(resolver)
        return resolver

    def _extend(self, overrides: dict[str, Override], resolver: Resolver,
                start: int) -> Iterator[tuple[dict[str, Override], Resolver]]:
        # Rules (extensions with `error`) are applied by _apply_rules once every extension has.
        for position in range(start, len(self._growing)):
            ext_index = self._growing[position]
            groups = self._match(self.extensions[ext_index], ext_index, overrides, resolver)
            if groups is None:
                continue
            for case in self._extension_overrides[ext_index]:
                extended = dict(overrides)
                extended.update(groups)
                extended.update(case)
                yield from self._extend(extended, self._resolver(extended), position + 1)
            return
        yield overrides, resolver

    def _apply_rules(self, overrides: dict[str, Override], resolver: Resolver) -> None:
        """Refuse a finished experiment that a rule (an extension with `error`) matches."""
        if not self.rules:
            return
        framework = resolver.framework
        rules = self._rules_by_framework.get(framework)
        if rules is None:
            # The rules this framework's experiments can break: a rule whose test of a value
            # no sweep changes fails here fails for every one of them.
            rules = self._rules_by_framework[framework] = [
                (index, rule) for index, rule in self.rules
                if _may_match_framework(rule.condition, framework)
                and self._constant_tests_hold(rule, resolver)]
        for index, rule in rules:
            if self._match(rule, index, overrides, resolver) is None:
                continue
            tested = ", ".join(f"{name}={render(resolver.value(name))}"
                               for name in rule.condition)
            swept = ", ".join(override.label for name, override in overrides.items()
                              if override.label and name not in rule.condition)
            raise PlanError(f"{rule.error} ({tested}" + (f"; experiment: {swept}" if swept
                                                         else "") + ")",
                            hint=f"the rule is {rule.source}")

    def _constant_tests_hold(self, rule: Extension, resolver: Resolver) -> bool:
        """False when a test of a value that the sweep never changes fails."""
        for name, test in rule.condition.items():
            if self.ctx.deps.get(name):
                continue  # the sweep may change it: tested per experiment
            if not resolver.has(name) or not condition_holds(test, resolver.value(name)):
                return False
        return True

    def _match(self, ext: Extension, index: int, overrides: dict[str, Override],
               resolver: Resolver) -> dict[str, Override] | None:
        """The regex-group overrides when every test of `ext` holds, else None.

        `resolver` is the resolver of these overrides. The answer depends on the values the
        condition tests, and so on the sweep inputs they reach: it is kept by those.
        """
        inputs = self._condition_inputs(index, ext)
        if inputs is None:
            return self._test(ext, index, resolver)
        key = (index, resolver.framework, *resolver.tokens(inputs))
        try:
            return self._matches[key]
        except KeyError:
            pass
        groups = self._matches[key] = self._test(ext, index, resolver)
        return groups

    def _condition_inputs(self, index: int, ext: Extension) -> tuple[str, ...] | None:
        """The sweep inputs a condition's values reach; None if its answer is not kept."""
        try:
            return self._inputs[index]
        except KeyError:
            pass
        reached: set[str] | None = set()
        for name in ext.condition:
            deps = self.ctx.deps.get(name)
            if deps is None:  # not a parameter: looked up every time, as it is resolved
                reached = None
                break
            reached.update(deps)
        inputs = tuple(sorted(reached)) if reached is not None else None
        if inputs is not None and not self.ctx.shared(inputs):
            inputs = None  # different in every experiment: keeping it would only cost memory
        self._inputs[index] = inputs
        return inputs

    def _test(self, ext: Extension, index: int,
              resolver: Resolver) -> dict[str, Override] | None:
        groups: dict[str, Override] = {}
        for name, test in ext.condition.items():
            if not resolver.has(name):
                return None
            value = resolver.value(name)
            if isinstance(test, str):
                try:
                    match = fullmatch_groups(test, render(value))
                except ConfigError as error:
                    labels = resolver.describe()
                    raise ConfigError(f"{ext.source}: condition on {name!r}: {error.message}"
                                      + (f" (experiment: {labels})" if labels else ""),
                                      hint=error.hint) from None
                if match is None:
                    return None
                for number, text in enumerate(match):
                    groups[f"{GROUP_PREFIX}@{index}.{name}_{number}"] = Override(
                        escape(text), ("group", text), ext.source)
            elif isinstance(test, list):
                if not any(_same(value, item) for item in test):
                    return None
            elif not _same(value, test):
                return None
        return groups

    def _framework(self, resolver: Resolver) -> str | None:
        if FRAMEWORK not in self.params and FRAMEWORK not in resolver.overrides:
            return None
        value = resolver.value(FRAMEWORK)
        return None if value is None else str(value)

    def _finalize(self, overrides: dict[str, Override], resolver: Resolver) -> dict[str, Any]:
        framework = resolver.framework
        layout = self._layouts.get(framework)
        if layout is None:
            layout = self._layouts[framework] = self._layout(resolver)
        experiment = dict(layout.template)
        excluded: set[str] | frozenset[str] = layout.not_in_id
        changed = self._changed(layout, overrides)
        since: list[Resolved] | None = None  # the entries `entries` was made from
        id_slots: tuple[int, ...] = ()  # the id's pieces of those made anew (_IdText)
        if changed is None:
            entries = [resolver.entry(name) for name in layout.varying]
        else:  # the sweep's order changes a few inputs at a time: take the rest as they were
            resolver.since = (layout.last[0], changed)
            since = layout.last[1]
            entries = since.copy()
            stale, id_slots = layout.stale(changed)
            for index in stale:
                entries[index] = resolver.entry(layout.varying[index])
        layout.last = (overrides, entries)
        for name, entry in zip(layout.varying, entries):
            experiment[name] = entry.value
            if entry.host and name not in excluded:
                excluded = excluded | {name}
        for name in overrides:
            if name not in experiment and not name.startswith(GROUP_PREFIX) and \
                    self.ctx.visible(name, framework):
                entry = resolver.entry(name)
                experiment[name] = entry.value
                if (entry.host or name.startswith("results.")) and name not in excluded:
                    excluded = excluded | {name}
        # `identity: when_set` names that no sweep changes are decided by the layout.
        unset = [name for name in layout.when_set if name in experiment
                 and experiment[name] is None]
        if unset:
            excluded = excluded | set(unset)
        if self.auto_id and experiment.get(ID) is None:
            if excluded is layout.not_in_id and len(experiment) == len(layout.template):
                identity = layout.id_text.identity(experiment, entries, since, id_slots)
            else:  # a host value among the varying ones, or a parameter the layout lacks
                identity = _identity({name: value for name, value in experiment.items()
                                      if name not in excluded})
            experiment[ID] = identity
            resolver.add(ID, Override(identity, identity, "<plan>"))
            for name in layout.post_id:
                experiment[name] = resolver.value(name)
        if ID_PARAMS in experiment:   # declared (the default configs): the planner sets it
            if excluded is layout.not_in_id and len(experiment) == len(layout.template):
                # The layout's names and exclusions: the layout's identity set.
                if layout.identity_set is None:
                    layout.identity_set = self.identity_sets.of(experiment, excluded)
                experiment[ID_PARAMS] = layout.identity_set
            else:
                experiment[ID_PARAMS] = self.identity_sets.of(experiment, excluded)
        return experiment

    @staticmethod
    def _changed(layout: _Layout, overrides: dict[str, Override]) -> frozenset[str] | None:
        """The inputs whose overrides differ from the last experiment's of this layout.

        None when there is none. Overrides are made once per axis item and extension case,
        so an input whose override is the same object has the same raw value.
        """
        if layout.last is None:
            return None
        before = layout.last[0]
        changed = {name for name, override in overrides.items()
                   if before.get(name) is not override}
        changed.update(name for name in before if name not in overrides)
        return frozenset(changed)


    def _layout(self, resolver: Resolver) -> _Layout:
        """Per framework: parameter order, values shared by all experiments, the rest's names."""
        template: dict[str, Any] = {}
        host: set[str] = set()
        varying: list[str] = []
        post_id: list[str] = []
        deps = self.ctx.deps
        for name in self.params:
            if not self.ctx.visible(name, resolver.framework):
                continue
            if name in self.post_id:
                template[name] = None
                post_id.append(name)
            elif deps.get(name):
                template[name] = None
                varying.append(name)
                if self.params[name].host:  # `identity: false`: out of every id, whatever its value
                    host.add(name)
            else:
                entry = resolver.entry(name)
                template[name] = entry.value
                if entry.host:
                    host.add(name)
        # `identity: when_set` names null in every experiment are out of every id; those that
        # a sweep may change are tested per experiment (_finalize).
        when_set = frozenset(name for name in self._when_set if name in template
                             and (name in varying or name in post_id))
        unset = {name for name in self._when_set if name in template
                 and name not in when_set and template[name] is None}
        not_in_id = frozenset(host | set(post_id) | unset | {ID, *NOT_IN_ID} | {
            name for name in template if name.startswith("results.")})
        inputs = tuple(frozenset(deps[name]) for name in varying)
        return _Layout(template, not_in_id, tuple(varying), tuple(post_id), inputs, when_set)


_STALE_KEPT = 4096  # sets of changed inputs a layout remembers (a sweep has a few)


class _Layout:
    """What all experiments of one framework share."""

    __slots__ = ("template", "not_in_id", "varying", "post_id", "inputs", "when_set", "last",
                 "id_text", "identity_set", "_stale")

    def __init__(self, template: dict[str, Any], not_in_id: frozenset[str],
                 varying: tuple[str, ...], post_id: tuple[str, ...],
                 inputs: tuple[frozenset[str], ...], when_set: frozenset[str]) -> None:
        self.template = template  # every parameter in order; values shared by all experiments
        self.not_in_id = not_in_id  # host values, outputs, the id and what depends on it
        self.varying = varying  # parameters the sweep can change
        self.post_id = post_id  # parameters that reference exp.id
        self.inputs = inputs  # per varying parameter: the sweep inputs it reaches
        self.when_set = when_set  # `identity: when_set` names that may be null or not
        # exp.id_params of the experiments with exactly the layout's names and exclusions.
        self.identity_set: dict[str, list[str]] | None = None
        # The last experiment of this layout: its overrides and the entries of `varying`.
        self.last: tuple[dict[str, Override], list[Resolved]] | None = None
        # The text exp.id hashes, of the parameters that identify an experiment.
        self.id_text = _IdText(template, not_in_id, varying)
        self._stale: dict[frozenset[str], tuple[tuple[int, ...], tuple[int, ...]]] = {}

    def stale(self, changed: frozenset[str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The positions in `varying` of the parameters that reach an input in `changed`.

        With them, the slots of those that are part of the id (`_IdText.slots`).
        """
        try:
            return self._stale[changed]
        except KeyError:
            pass
        if len(self._stale) >= _STALE_KEPT:
            self._stale.clear()
        positions = tuple(
            index for index, inputs in enumerate(self.inputs) if not inputs.isdisjoint(changed))
        slots = tuple(slot for slot in map(self.id_text.slot_at.__getitem__, positions)
                      if slot is not None)
        found = self._stale[changed] = (positions, slots)
        return found


def _identity(payload: dict[str, Any]) -> str:
    """exp.id: the hash of the values that identify an experiment, whatever their order."""
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]


class _IdText:
    """`_identity` of the experiments of one layout, its text made a value at a time.

    `orjson.dumps(payload, option=OPT_SORT_KEYS)` is `{`, the `"name":value` pieces in the
    order of the names, joined by `,`, and `}`: the piece of a value that no sweep changes is
    made once, that of a varying one once per value object (the planner shares values and
    never changes one). The first experiment checks the pieces against the whole text; were
    they different, every experiment would hash the whole text.

    Consecutive experiments share most entries (`Planner._finalize`): when this one's
    entries were made from those of the experiment whose id was made last, only the pieces
    of the entries made anew are looked at.
    """

    __slots__ = ("names", "pieces", "slots", "slot_at", "last", "made_for", "checked", "whole")

    def __init__(self, template: dict[str, Any], not_in_id: frozenset[str],
                 varying: tuple[str, ...]) -> None:
        self.names = sorted(name for name in template if name not in not_in_id)
        # The pieces of the text of the last id made, a varying value's made for its value.
        self.pieces: list[bytes] = []
        self.slots: list[tuple[int, str, bytes]] = []  # (index in pieces, name, its prefix)
        for index, name in enumerate(self.names):
            prefix = orjson.dumps(name) + b":"
            if name in varying:
                self.slots.append((index, name, prefix))
                self.pieces.append(b"")
            else:
                self.pieces.append(prefix + orjson.dumps(template[name],
                                                         option=orjson.OPT_SORT_KEYS))
        # Per varying parameter (the layout's order): its slot, or None when it is no part of
        # the id.
        position_of = {name: position for position, (_, name, _) in enumerate(self.slots)}
        self.slot_at = tuple(position_of.get(name) for name in varying)
        self.last: list[tuple[Any, bytes] | None] = [None] * len(self.slots)
        # The entries of the experiment whose pieces `pieces` holds (None: unknown).
        self.made_for: list[Any] | None = None
        self.checked = False
        self.whole = False

    def identity(self, experiment: dict[str, Any], entries: list[Any],
                 since: list[Any] | None = None, stale: tuple[int, ...] = ()) -> str:
        """exp.id of `experiment`, whose varying values are those of `entries`.

        `since`: the entries `entries` was copied from, but for the slots `stale` (the
        positions in `slots` of the entries made anew: `_Layout.stale`).
        """
        if self.whole:
            return _identity({name: experiment[name] for name in self.names})
        pieces, last = self.pieces, self.last
        # The other slots' values are the same objects as those the pieces were made of.
        slots = stale if since is not None and since is self.made_for else \
            range(len(self.slots))
        self.made_for = None  # until every piece is made
        for position in slots:
            index, name, prefix = self.slots[position]
            value = experiment[name]
            kept = last[position]
            if kept is None or kept[0] is not value:
                kept = last[position] = (value, prefix + orjson.dumps(
                    value, option=orjson.OPT_SORT_KEYS))
            pieces[index] = kept[1]
        self.made_for = entries
        text = b"{" + b",".join(pieces) + b"}"
        if not self.checked:
            self.checked = True
            whole = orjson.dumps({name: experiment[name] for name in self.names},
                                 option=orjson.OPT_SORT_KEYS)
            if text != whole:
                self.whole, text = True, whole
        return hashlib.sha256(text).hexdigest()[:12]


def max_experiments(spec: Spec) -> int:
    """`sys.max_experiments` of the spec (a positive int), else the default."""
    definition = spec.params.get(MAX_EXPERIMENTS)
    if definition is None or definition.value is None:
        return DEFAULT_MAX_EXPERIMENTS
    try:
        limit = cast(definition.value, "int")
    except ValueError as error:
        raise ConfigError(f"{definition.source}: parameter {MAX_EXPERIMENTS!r}: {error}") \
            from None
    if limit < 1:
        raise ConfigError(f"{definition.source}: parameter {MAX_EXPERIMENTS!r}: must be at "
                          f"least 1, not {limit}")
    return limit


def _may_match_framework(condition: dict[str, Any], framework: str | None) -> bool:
    """False when a condition's test of exp.framework rules out this framework."""
    if FRAMEWORK not in condition:
        return True
    return framework is not None and condition_holds(condition[FRAMEWORK], framework)


def condition_holds(test: Any, value: Any) -> bool:
    """Whether one test of a condition holds for `value` (docs/language.md section 7)."""
    if isinstance(test, str):
        return fullmatch_groups(test, render(value)) is not None
    if isinstance(test, list):
        return any(_same(value, item) for item in test)
    return _same(value, test)


def _same(value: Any, other: Any) -> bool:
    """Extension tests compare type and value: `4` matches 4, not "4" or 4.0."""
    return type(value) is type(other) and value == other


def _note_inputs(values: Mapping[str, Any], alternatives: dict[str, list[Any]],
                 varying: list[str]) -> None:
    """Record that a sweep may give each of `values`' names its raw value."""
    for key, raw in values.items():
        alternatives.setdefault(key, []).append(raw)
        varying.append(key)


def _group_names(raws: list[Any]) -> Iterator[str]:
    # A group's name is written out where it is referenced: values that never spell it (all
    # but a few) are not walked. Their repr holds every string of them, its `_`, letters and
    # `@` as they are.
    if GROUP_PREFIX + "@" not in repr(raws):
        return
    for raw in raws:
        names, _ = references(raw)
        for name in names:
            if name.startswith(GROUP_PREFIX + "@"):
                yield name


def host_environment() -> dict[str, str]:
    """The process environment, plus DLBS_ROOT (this checkout) unless the user set it."""
    env = dict(os.environ)
    env.setdefault("DLBS_ROOT", str(Path(__file__).resolve().parents[2]))
    return env


def plan(spec: Spec, env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The whole plan as a list (convenience for tests and small specs)."""
    return list(Planner(spec, env).experiments())
