"""Parameters stored as a shared base plus each attempt's differences.

The experiments of a sweep share most of their 60-odd parameters. The store keeps, besides
each attempt's whole `params` (for SQL users and `dlbs parse`), a reference to a base set of
parameters and the attempt's differences from it: a report of 100,000 experiments then
parses a few bases and 100,000 small differences instead of 100,000 whole parameter sets
(about 1 s saved), and sees at once which keys can vary at all.

A difference is the JSON `[{key: value, ...}, [removed key, ...]]`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dlbs.util import exact_json

# A base is reused while an attempt differs from it in at most this fraction of its keys.
REUSE_FRACTION = 0.5
# Bases a writer remembers (a sweep over several frameworks has one base per framework).
REMEMBERED = 8


def difference(base: Mapping[str, Any], params: Mapping[str, Any]) -> tuple[dict[str, Any],
                                                                             list[str]]:
    """What turns `base` into `params`: the keys to set, the keys to remove."""
    changed = {key: value for key, value in params.items()
               if key not in base or not _same(base[key], value)}
    removed = [key for key in base if key not in params]
    return changed, removed


def _same(a: Any, b: Any) -> bool:
    # 1 == 1.0 == True in Python, not in JSON; the stored parameters must come back exact.
    if type(a) is not type(b) or a != b:
        return False
    if isinstance(a, list | dict):
        return exact_json.dumps(a) == exact_json.dumps(b)
    return True


def apply(base: Mapping[str, Any], changed: Mapping[str, Any],
          removed: list[str]) -> dict[str, Any]:
    """`base` with a difference applied (a new dict)."""
    params = dict(base)
    params.update(changed)
    for key in removed:
        params.pop(key, None)
    return params


class BaseChooser:
    """The writer's side: which stored base an attempt's parameters are written against."""

    def __init__(self) -> None:
        # (base id, parameters), most recently used first.
        self._bases: list[tuple[int, dict[str, Any]]] = []

    def choose(self, params: Mapping[str, Any]) -> tuple[int, dict[str, Any], list[str]] | None:
        """The best remembered base and the difference, or None when a new base is better."""
        best = None
        for base_id, base in self._bases:
            changed, removed = difference(base, params)
            size = len(changed) + len(removed)
            if best is None or size < best[0]:
                best = (size, base_id, changed, removed)
        if best is None or best[0] > REUSE_FRACTION * max(1, len(params)):
            return None
        self._touch(best[1])
        return best[1], best[2], best[3]

    def remember(self, base_id: int, params: Mapping[str, Any]) -> None:
        """A base just stored."""
        self._bases.insert(0, (base_id, dict(params)))
        del self._bases[REMEMBERED:]

    def forget(self) -> None:
        """Drop every remembered base (after a rolled-back write that may have made one)."""
        self._bases.clear()

    def _touch(self, base_id: int) -> None:
        for index, (known, _) in enumerate(self._bases):
            if known == base_id:
                self._bases.insert(0, self._bases.pop(index))
                return
