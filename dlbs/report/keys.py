"""Row keys: which identity parameters vary, and the fewest that tell experiments apart.

Every identity parameter (identity.py) that varies across a report's experiments would split
its rows; many vary only because another does (`exp.effective_batch` with the GPU count and
replica batch, a framework's argument list with everything). Keys are taken in a readable
order of preference and kept only when they split the rows further, so the chosen keys
separate exactly the experiments that all varying identity parameters separate, and
nothing else. When even that leaves two experiments in one cell (parameters the report does
not know, records without ids), `exp.id` becomes a row key: a cell never holds two
experiments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dlbs.report.identity import DEVICE_MODEL, KeyRules, column_of, is_identity_key
from dlbs.results.columns import Attempts

# The usual parameters, in display order; the sizes go last, next to the numbers.
LEADING = ("exp.model", "exp.framework", "exp.phase", "exp.dtype", "exp.device_type",
           DEVICE_MODEL)
SIZES = ("exp.num_nodes", "exp.num_gpus", "exp.num_replicas", "exp.replica_batch",
         "exp.effective_batch")
EXP_ID = "exp.id"

TITLES = {
    "exp.model": "model", "exp.framework": "framework", "exp.phase": "phase",
    "exp.dtype": "dtype", "exp.device_type": "device", DEVICE_MODEL: "device model",
    "exp.num_nodes": "nodes", "exp.num_gpus": "gpus", "exp.num_replicas": "replicas",
    "exp.replica_batch": "replica batch", "exp.effective_batch": "effective batch",
    EXP_ID: "exp.id", "exp.scenario": "scenario", "exp.weights": "weights",
    "exp.seq_len": "sequence",
}
# Field names in CSV and JSON records (programs read these; the others keep their key).
FIELDS = {
    "exp.model": "model", "exp.framework": "framework", "exp.phase": "phase",
    "exp.dtype": "dtype", "exp.device_type": "device", DEVICE_MODEL: "device_model",
    "exp.num_nodes": "nodes", "exp.num_gpus": "gpus", "exp.num_replicas": "replicas",
    "exp.replica_batch": "replica_batch", "exp.effective_batch": "effective_batch",
    EXP_ID: "exp_id", "exp.scenario": "scenario", "exp.weights": "weights",
    "exp.seq_len": "seq_len",
}
NUMERIC = frozenset((*SIZES, "exp.seq_len"))
# refine() numbers groups through a table of this many entries at most (else it sorts).
_DENSE_LIMIT = 1 << 23

# key -> one code per experiment (equal codes: equal values; 0: None).
ValuesOf = Callable[[str], np.ndarray]


def title(key: str) -> str:
    """A key's column title."""
    return TITLES.get(key, key)


def field_name(key: str) -> str:
    """A key's name in CSV and JSON records."""
    return FIELDS.get(key, key)


def identity_keys(attempts: Attempts, rows: np.ndarray, rules: KeyRules) -> list[str]:
    """Identity keys that some of the attempts `rows` have; the device model last.

    In `preference` order, by name within a rank.
    """
    keys = []
    for key in attempts.keys():
        if not is_identity_key(key, rules):
            continue
        uniform = attempts.uniform(key)
        if uniform[1] if uniform is not None else attempts.present(key)[rows].any():
            keys.append(key)
    return [*preference(keys, rules), DEVICE_MODEL]


def varying_keys(values_of: ValuesOf, keys: Sequence[str],
                 attempts: Attempts | None = None) -> list[str]:
    """The keys whose value is not the same everywhere (a missing key is None).

    With `attempts` (those `values_of` reads), keys known to be uniform are not looked at.
    """
    varying = []
    for key in keys:
        if attempts is not None and key != DEVICE_MODEL and attempts.uniform(key) is not None:
            continue
        codes = values_of(key)
        if len(codes) and (codes != codes[0]).any():
            varying.append(key)
    return varying


def preference(keys: Sequence[str], rules: KeyRules, first: Sequence[str] = ()) -> list[str]:
    """`keys` in the order they are tried as row keys.

    `first`, the usual ones, a user's own parameters, declared parameters with a plain
    default, computed ones last, each after those it is computed from: a value that follows
    from others (a framework's argument list) is tried after them, so that it becomes a row
    key only when they do not already tell its experiments apart.
    """
    def rank(key: str) -> tuple[int, int]:
        if key in first:
            return (0, list(first).index(key))
        if key in LEADING:
            return (1, LEADING.index(key))
        if key in SIZES:
            return (2, SIZES.index(key))
        if key not in rules.declared:
            return (3, 0)
        if key in rules.plain_defaults:
            return (4, 0)
        return (5, rules.derivation.get(key, 0))
    return sorted(keys, key=rank)   # stable: first-seen order within a rank


def display_order(keys: Sequence[str]) -> list[str]:
    """Row keys as columns: the usual ones first, then the others, the sizes last."""
    def rank(key: str) -> tuple[int, int]:
        if key in LEADING:
            return (0, LEADING.index(key))
        if key in SIZES:
            return (2, SIZES.index(key))
        if key == EXP_ID:
            return (3, 0)
        return (1, 0)
    return sorted(keys, key=rank)


def refine(groups: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, int]:
    """Split the groups (one number per experiment) by one key's codes; new numbers, count."""
    if not len(groups):
        return groups, 0
    width = int(codes.max()) + 1
    combined = groups.astype(np.int64) * width + codes
    space = (int(groups.max()) + 1) * width
    if space <= _DENSE_LIMIT:
        used = np.zeros(space, dtype=bool)
        used[combined] = True
        numbers = np.cumsum(used) - 1
        return numbers[combined], int(numbers[-1]) + 1
    distinct, inverse = np.unique(combined, return_inverse=True)
    return inverse.reshape(-1), len(distinct)


def partition(count: int, keys: Sequence[str], values_of: ValuesOf) -> tuple[np.ndarray, int]:
    """Group numbers of `count` experiments by the values of `keys`."""
    groups, size = np.zeros(count, dtype=np.int64), (1 if count else 0)
    for key in keys:
        groups, size = refine(groups, values_of(key))
    return groups, size


def choose(count: int, candidates: Sequence[str], fixed: Sequence[str],
           values_of: ValuesOf) -> list[str]:
    """`fixed`, then each candidate that splits the experiments further (see the module)."""
    groups, size = partition(count, fixed, values_of)
    chosen = list(fixed)
    for key in candidates:
        if size == count:
            break   # every experiment is alone: no key can split further
        refined, refined_size = refine(groups, values_of(key))
        if refined_size > size:
            chosen.append(key)
            groups, size = refined, refined_size
    return chosen


def undetermined(count: int, keys: Sequence[str], others: Sequence[str],
                 values_of: ValuesOf) -> list[str]:
    """Those of `others` that split the experiments grouped by `keys` (they vary within)."""
    groups, size = partition(count, keys, values_of)
    return [key for key in others if refine(groups, values_of(key))[1] > size]


def loose_keys(count: int, fixed: Sequence[str], others: Sequence[str], rules: KeyRules,
               values_of: ValuesOf) -> list[str]:
    """The fewest of `others` that must join `fixed` to tell the experiments apart.

    In the order of preference; [] when `fixed` already tells them apart (a report's --by,
    a history's configurations: one cell, one series, never two experiments).
    """
    if not undetermined(count, fixed, others, values_of):
        return []
    return choose(count, preference(others, rules), fixed, values_of)[len(fixed):]


def value_lists(attempts: Attempts, rows: np.ndarray) -> ValuesOf:
    """A memoised `key -> codes of the attempts rows` (one attempt per experiment)."""
    cache: dict[str, np.ndarray] = {}

    def values_of(key: str) -> np.ndarray:
        found = cache.get(key)
        if found is None:
            uniform = attempts.uniform(key) if key != DEVICE_MODEL else None
            found = cache[key] = np.full(len(rows), uniform[0], dtype=np.intp) \
                if uniform is not None else column_of(attempts, key).codes[rows]
        return found
    return values_of


def distinct(codes: np.ndarray) -> int:
    """How many different values the codes stand for."""
    return len(np.unique(codes))
