"""Which parameters identify an experiment, decided once by the planner and stored with it.

`exp.id` hashes every parameter of an experiment except those left out of it (host values,
`identity: false`, `identity: when_set` while null, what is computed from them or from the
environment or from `exp.id`, and `results.*`: builder.py). The planner stores that set
with each experiment as `exp.id_params`, so that reports (dlbs/report/identity.py) read it
instead of guessing it from today's configs:

    {"set": [...], "default": [...], "computed": [...]}

- `set`: parameters the spec sets (its axes, its extensions, its own parameters, the
  configs' parameters it overrides); reports list them above the tables when constant.
- `default`: declared parameters at the configs' plain default.
- `computed`: values computed from other parameters, each after those it reads (the longest
  chain of references first counted); reports try them as row keys last, and a baseline
  does not compare one that follows from the keys it compares.

Each list is in the experiment's order (declaration order). One value is made per set of
keys and exclusions, and shared by the experiments that have them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from dlbs.config.spec import ParamDef, Spec
from dlbs.plan.graph import matching, references

ID_PARAMS = "exp.id_params"
SET, DEFAULT, COMPUTED = "set", "default", "computed"
GROUPS = (SET, DEFAULT, COMPUTED)


def parameter_references(params: Mapping[str, ParamDef]) -> dict[str, frozenset[str]]:
    """Per parameter, the parameters its value reads directly (computed names included)."""
    refs: dict[str, frozenset[str]] = {}
    for name, definition in params.items():
        names, patterns = references(definition.value)   # ${${exp.framework}.x}: patterns
        refs[name] = names | frozenset(matching(patterns, params)) if patterns else names
    return refs


def derivations(refs: Mapping[str, frozenset[str]]) -> tuple[dict[str, int],
                                                             dict[str, frozenset[str]]]:
    """Per parameter, how deep it is computed, and from which parameters.

    The depth is the longest chain of references to a parameter without (0: a plain value);
    the sources are the parameters it reads, directly or through others. A reference cycle
    (the planner refuses one) is cut where it closes.
    """
    depths: dict[str, int] = {}
    sources: dict[str, frozenset[str]] = {}

    def visit(name: str, seen: frozenset[str]) -> None:
        if name in depths:
            return
        below = [ref for ref in refs.get(name, ()) if ref in refs and ref not in seen
                 and ref != name]
        for ref in below:
            visit(ref, seen | {name})
        depths[name] = 1 + max((depths[ref] for ref in below), default=-1)
        sources[name] = frozenset(below).union(*(sources[ref] for ref in below))

    for name in refs:
        visit(name, frozenset())
    return depths, sources


def spec_set_names(spec: Spec, defaults: Iterable[str]) -> frozenset[str]:
    """The parameters the spec sets beyond the default configs (files `defaults`)."""
    prefixes = tuple(defaults)
    names: set[str] = set()
    for axis in spec.axes.values():
        if axis.zipped:
            for item in axis.items:
                names.update(item)
        else:
            names.add(axis.name)
    for extension in spec.extensions:
        if not extension.source.startswith(prefixes):
            names.update(extension.parameters)
            for case in extension.cases:
                names.update(case)
    names.update(name for name, definition in spec.params.items()
                 if not definition.source.startswith(prefixes))
    return frozenset(names)


class IdentitySets:
    """The `exp.id_params` of a planner's experiments (see the module)."""

    def __init__(self, params: Mapping[str, ParamDef], set_names: Collection[str]) -> None:
        refs = parameter_references(params)
        depths, _ = derivations(refs)
        self._rank: dict[str, tuple[int, int]] = {}
        for name in params:
            if name in set_names or name not in refs:
                self._rank[name] = (0, 0)
            elif refs[name]:
                self._rank[name] = (2, depths[name])
            else:
                self._rank[name] = (1, 0)
        self._set_names = frozenset(set_names)
        self._made: dict[tuple[Any, ...], dict[str, list[str]]] = {}

    def of(self, experiment: Mapping[str, Any],
           excluded: Collection[str]) -> dict[str, list[str]]:
        """The identity set of `experiment`, whose names `excluded` are left out of its id."""
        key = (tuple(experiment), excluded if isinstance(excluded, frozenset)
               else frozenset(excluded))
        found = self._made.get(key)
        if found is None:
            groups: dict[str, list[tuple[int, int, str]]] = {group: [] for group in GROUPS}
            for position, name in enumerate(experiment):
                if name in excluded or name == ID_PARAMS:
                    continue
                group, depth = self._rank.get(name, (0, 0))   # not declared: the spec's
                groups[GROUPS[group]].append((depth, position, name))
            found = self._made[key] = {group: [name for _, _, name in sorted(items)]
                                       for group, items in groups.items()}
        return found


def default_sources() -> list[str]:
    """The files of the default configs, as a ParamDef's source names them (or none)."""
    from dlbs.config.loader import default_config_files
    from dlbs.errors import ConfigError

    try:
        return [str(Path(path)) for path in default_config_files()]
    except ConfigError:
        return []
