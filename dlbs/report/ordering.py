"""The order of rows and columns: None first, then numbers, then text in natural order.

resnet18 comes before resnet50 before resnet101; mixed types never compare directly.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from dlbs.report.select import as_text


def ordered_by_codes(codes: Sequence[np.ndarray], tables: Sequence[Any],
                     size: int) -> np.ndarray:
    """Positions 0..size-1 by their values `tables[k][codes[k]]` (sort_key), ties in order."""
    sort_columns = [np.arange(size)]
    for key_codes, table in zip(reversed(codes), reversed(tables)):
        used = np.unique(key_codes)
        ranks = _ranks([table[code] for code in used.tolist()])
        sort_columns.append(ranks[np.searchsorted(used, key_codes)])
    return np.lexsort(sort_columns)


def _ranks(values: list[Any]) -> np.ndarray:
    """Each value's place by sort_key; values with equal sort keys share one."""
    keys = [sort_key(value) for value in values]
    ranks = np.empty(len(values), dtype=np.intp)
    rank, previous = -1, None
    for index in sorted(range(len(values)), key=keys.__getitem__):
        if rank < 0 or keys[index] != previous:
            rank, previous = rank + 1, keys[index]
        ranks[index] = rank
    return ranks


_DIGITS = re.compile(r"(\d+)")


@functools.lru_cache(maxsize=1 << 16)
def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that puts resnet18 before resnet50 before resnet101."""
    return tuple(int(part) if part.isdigit() else part.lower()
                 for part in _DIGITS.split(text))


def sort_key(value: Any) -> tuple[Any, ...]:
    """Sort key of a row value: None first, then numbers, then text in natural order."""
    # None first, then numbers, then text (naturally): mixed types never compare directly.
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (2, natural_key(str(value).lower()))
    if isinstance(value, int | float):
        return (1, value)
    return (2, natural_key(as_text(value)))
