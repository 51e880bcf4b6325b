"""Which sweep-controlled names each parameter can depend on.

A parameter's resolved value is a function of the raw values in its reference closure. Names
that a sweep can change (axis keys, names that extensions set) are the only inputs that vary
between experiments, so a parameter's value can be shared by every experiment that agrees on
the ones it reaches. This is what makes planning thousands of experiments cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dlbs.config.template import parse


def references(raw: Any) -> tuple[frozenset[str], bool]:
    """Names a raw value references directly, and whether some name is computed."""
    if isinstance(raw, str):
        if "$" not in raw:
            return frozenset(), False
        template = parse(raw)
        return template.static_refs, template.dynamic
    if isinstance(raw, list):
        items: Iterable[Any] = raw
    elif isinstance(raw, dict):
        items = raw.values()
    else:
        return frozenset(), False
    names: set[str] = set()
    dynamic = False
    for item in items:
        item_names, item_dynamic = references(item)
        names |= item_names
        dynamic = dynamic or item_dynamic
    return frozenset(names), dynamic


def sweep_dependencies(alternatives: Mapping[str, list[Any]],
                       varying: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """For each name, the varying names in its reference closure (itself included).

    `alternatives` maps a name to every raw value it may take (the base value, axis items,
    extension values); an edge exists when any of them references the other name. A computed
    reference (`${${a}.b}`) may reach anything, so such a name depends on every varying name.
    """
    varying_order = list(dict.fromkeys(varying))
    varying_set = set(varying_order)
    edges: dict[str, frozenset[str]] = {}
    dynamic: set[str] = set()
    for name, raws in alternatives.items():
        names: set[str] = set()
        for raw in raws:
            refs, is_dynamic = references(raw)
            names |= refs
            if is_dynamic:
                dynamic.add(name)
        edges[name] = frozenset(names)

    result: dict[str, tuple[str, ...]] = {}
    for root in alternatives:
        seen = {root}
        stack = [root]
        everything = False
        while stack and not everything:
            node = stack.pop()
            if node in dynamic:
                everything = True
                break
            for child in edges.get(node, ()):
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        if everything:
            result[root] = tuple(varying_order)
        else:
            result[root] = tuple(n for n in varying_order if n in seen)
    return result
