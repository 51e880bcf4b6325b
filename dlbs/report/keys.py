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
from typing import Any

from dlbs.report.identity import (
    DEVICE_MODEL,
    ENV_PREFIX,
    KeyRules,
    hashable,
    is_identity_key,
    value_of,
)
from dlbs.results.sources import Record

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
}
# Field names in CSV and JSON records (programs read these; the others keep their key).
FIELDS = {
    "exp.model": "model", "exp.framework": "framework", "exp.phase": "phase",
    "exp.dtype": "dtype", "exp.device_type": "device", DEVICE_MODEL: "device_model",
    "exp.num_nodes": "nodes", "exp.num_gpus": "gpus", "exp.num_replicas": "replicas",
    "exp.replica_batch": "replica_batch", "exp.effective_batch": "effective_batch",
    EXP_ID: "exp_id", "exp.scenario": "scenario", "exp.weights": "weights",
}
NUMERIC = frozenset(SIZES)

ValuesOf = Callable[[str], list[Any]]


def title(key: str) -> str:
    """A key's column title."""
    return TITLES.get(key, key)


def field_name(key: str) -> str:
    """A key's name in CSV and JSON records."""
    return FIELDS.get(key, key)


def identity_keys(records: Sequence[Record], rules: KeyRules) -> list[str]:
    """Identity keys of `records` (one record per experiment), in first-seen order."""
    keys: dict[str, None] = {}
    previous: Any = None
    for record in records:
        names = record.experiment.keys()
        if previous is not None and names == previous:
            continue   # most experiments of a sweep have the same keys: compared in C
        previous = names
        for key in names:
            if key not in keys and is_identity_key(key, rules):
                keys[key] = None
    keys[DEVICE_MODEL] = None
    return list(keys)


def varying_keys(records: Sequence[Record], keys: Sequence[str]) -> list[str]:
    """The keys whose value is not the same in every record (a missing key is None).

    The common case, a key that agrees with the first record, is checked for all keys at
    once by list comparison; only a disagreement is looked at key by key.
    """
    if not records:
        return []
    plain = [key for key in keys if key != DEVICE_MODEL]
    first = records[0].experiment
    reference = [first.get(key) for key in plain]
    varying: set[str] = set()
    for record in records:
        experiment = record.experiment
        current = list(map(experiment.get, plain))
        if current == reference:
            continue
        changed = {index for index, (a, b) in enumerate(zip(current, reference)) if a != b}
        varying.update(plain[index] for index in changed)
        keep = [index for index in range(len(plain)) if index not in changed]
        plain = [plain[index] for index in keep]
        reference = [reference[index] for index in keep]
    if DEVICE_MODEL in keys and len({value_of(r, DEVICE_MODEL) for r in records}) > 1:
        varying.add(DEVICE_MODEL)
    return [key for key in keys if key in varying]


def preference(keys: Sequence[str], rules: KeyRules, first: Sequence[str] = ()) -> list[str]:
    """`keys` in the order they are tried as row keys.

    `first`, the usual ones, a user's own parameters, declared parameters with a plain
    default, computed ones last.
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
        return (5, 0)
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


def refine(groups: list[int], values: Sequence[Any]) -> tuple[list[int], int]:
    """Split the groups (one id per experiment) by one key's values; new ids and count."""
    table: dict[tuple[int, Any], int] = {}
    refined = [table.setdefault((group, value), len(table))
               for group, value in zip(groups, values)]
    return refined, len(table)


def partition(count: int, keys: Sequence[str], values_of: ValuesOf) -> tuple[list[int], int]:
    """Group ids of `count` experiments by the values of `keys`."""
    groups, size = [0] * count, (1 if count else 0)
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


def value_lists(records: Sequence[Record]) -> ValuesOf:
    """A memoised `key -> [hashable value per record]`."""
    cache: dict[str, list[Any]] = {}

    def values_of(key: str) -> list[Any]:
        found = cache.get(key)
        if found is None:
            if key.startswith(ENV_PREFIX):
                found = [value_of(record, key) for record in records]
            else:
                found = [record.experiment.get(key) for record in records]
            types = set(map(type, found))
            if list in types or dict in types:
                found = [hashable(value) for value in found]
            cache[key] = found
        return found
    return values_of
