"""Which sweep-controlled names each parameter can depend on.

A parameter's resolved value is a function of the raw values in its reference closure. Names
that a sweep can change (axis keys, names that extensions set) are the only inputs that vary
between experiments, so a parameter's value can be shared by every experiment that agrees on
the ones it reaches. This is what makes planning thousands of experiments cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dlbs.config.template import parse, wildcard_match

Pattern = tuple[str, ...]


def references(raw: Any) -> tuple[frozenset[str], frozenset[Pattern]]:
    """Names a raw value references directly, and the patterns of the names it computes."""
    if isinstance(raw, str):
        if "$" not in raw:
            return frozenset(), frozenset()
        template = parse(raw)
        return template.static_refs, template.patterns
    if isinstance(raw, list):
        items: Iterable[Any] = raw
    elif isinstance(raw, dict):
        items = raw.values()
    else:
        return frozenset(), frozenset()
    names: set[str] = set()
    patterns: set[Pattern] = set()
    for item in items:
        item_names, item_patterns = references(item)
        names |= item_names
        patterns |= item_patterns
    return frozenset(names), frozenset(patterns)


def matching(patterns: Iterable[Pattern], names: Iterable[str]) -> set[str]:
    """The names that a computed reference with one of `patterns` can reach."""
    patterns = list(patterns)
    return {name for name in names if any(wildcard_match(p, name) for p in patterns)}


def sweep_dependencies(alternatives: Mapping[str, list[Any]],
                       varying: Iterable[str]) -> dict[str, tuple[str, ...]]:
    r"""For each name, the varying names in its reference closure (itself included).

    `alternatives` maps a name to every raw value it may take (the base value, axis items,
    extension values); an edge exists when any of them references the other name. A computed
    reference (`${${a}.b}`) has an edge to every name its pattern (anything, then `.b`)
    matches: names outside `alternatives` come from the environment, which no experiment changes.
    """
    varying_order = list(dict.fromkeys(varying))
    edges: dict[str, set[str]] = {}
    for name, raws in alternatives.items():
        names: set[str] = set()
        patterns: set[Pattern] = set()
        for raw in raws:
            refs, raw_patterns = references(raw)
            names |= refs
            patterns |= raw_patterns
        if patterns:
            names |= matching(patterns, alternatives)
        edges[name] = names

    result: dict[str, tuple[str, ...]] = {}
    for root in alternatives:
        seen = {root}
        stack = [root]
        while stack:
            for child in edges.get(stack.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        result[root] = tuple(n for n in varying_order if n in seen)
    return result
