"""Which keys tell experiments apart, and which experiment an attempt belongs to.

An experiment's id (`exp.id`) is a hash of its identity parameters (dlbs/plan/builder.py):
every parameter except those the configs declare `host: true` or `identity: false`, those
declared `identity: when_set` whose value is null, those whose value is computed from such a
parameter or from the environment, those computed from `exp.id` itself (`exp.log_file`),
and `results.*`. The planner stores that set with each
experiment (`exp.id_params`, dlbs/plan/identity.py: the parameters the spec set, those at the
configs' default, the computed ones in the order they are computed), and reports read it:
they key their rows by the identity parameters, never by host or run-control values, with
one exception: the device model (`env.device_model`: the GPU model for GPU experiments, else
the CPU model), since an H100 run and an H200 run of one spec share an id.

Results that carry no such set (written by an earlier dlbs, DLBS's logs, records written by
hand) are read with the rules of the default configs (`default_rules`), as the planner would
have decided them today: parameters they do not declare are identity parameters.

Keys under `env.` are read from the environment a results database recorded with the
attempt (host, gpu_model, gpu_driver, ...); logs carry none.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlbs.errors import ConfigError
from dlbs.plan.identity import COMPUTED, DEFAULT, ID_PARAMS, SET, derivations, parameter_references
from dlbs.results.columns import Attempts, Column, Record, finite_numbers
from dlbs.util import exact_json

ENV_PREFIX = "env."
DEVICE_MODEL = "env.device_model"
# What backends print besides results.* (titles, versions) and the keys the planner leaves
# out of the id by construction: never identity.
OUTPUT_KEYS = frozenset({
    "exp.id", "exp.log_file", "exp.model_title", "exp.framework_title", "exp.framework_ver",
    "exp.device_title", "exp.status_msg", ID_PARAMS,
})


@dataclass(frozen=True)
class KeyRules:
    """What is known about parameters: from stored identity sets, or the default configs."""

    # Declared host/identity: false, or computed from such a parameter or the environment.
    non_identity: frozenset[str]
    # Every parameter the configs declare.
    declared: frozenset[str]
    # Declared parameters whose default is a plain value (no reference): value by name.
    plain_defaults: Mapping[str, Any]
    # Computed parameters: the longest chain of references from their default to a plain
    # one (`mxnet.static_graph` follows `mxnet.hybridize`: 1; `mxnet.args` renders it: 2),
    # and every declared parameter that their default reads, directly or not.
    derivation: Mapping[str, int] = field(default_factory=dict)
    sources: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # From stored identity sets: exactly these parameters are identity parameters (None:
    # those that `non_identity` does not name).
    identity: frozenset[str] | None = None
    # Declared `identity: when_set`: identity parameters only when not null.
    when_set: frozenset[str] = frozenset()


def key_rules(attempts: Attempts | None = None) -> KeyRules:
    """The rules of `attempts`: their stored identity sets, else the default configs'.

    The stored sets when every attempt has one (see the module).
    """
    if attempts is not None:
        stored = stored_rules(attempts)
        if stored is not None:
            return stored
    return default_rules()


def stored_rules(attempts: Attempts) -> KeyRules | None:
    """Rules from the identity sets the planner stored (exp.id_params), None without one.

    A parameter the spec set is treated as one the configs do not declare (a row key before
    the others, shown above the tables when constant); a computed one is computed from
    every parameter before it in its set.
    """
    if not attempts.size:
        return None
    column = attempts.column(ID_PARAMS)
    if (column.codes == 0).any():
        return None
    identity: set[str] = set()
    declared: set[str] = set()
    depth: dict[str, int] = {}
    sources: dict[str, frozenset[str]] = {}
    for code in np.unique(column.codes).tolist():
        stored = column.values[code]
        if not isinstance(stored, dict) or not all(
                isinstance(stored.get(group), list) for group in (SET, DEFAULT, COMPUTED)):
            return None
        plain = [str(name) for name in (*stored[SET], *stored[DEFAULT])]
        computed = [str(name) for name in stored[COMPUTED]]
        identity.update(plain, computed)
        declared.update(str(name) for name in stored[DEFAULT])
        declared.update(computed)
        for position, name in enumerate(computed):
            depth[name] = max(depth.get(name, 0), position + 1)
            sources[name] = sources.get(name, frozenset()) | frozenset(
                plain + computed[:position])
    return KeyRules(frozenset(), frozenset(declared), {}, depth, sources,
                    frozenset(identity))


@functools.lru_cache(maxsize=1)
def default_rules() -> KeyRules:
    """The rules of the default configs (read once; without configs, only built-in rules)."""
    from dlbs.config.loader import load_spec

    try:
        spec = load_spec(None)
    except ConfigError:
        return KeyRules(frozenset(), frozenset(), {})
    params = spec.params
    refs = parameter_references(params)
    non_identity = {name for name, definition in params.items() if definition.host}
    non_identity.update(name for name, names in refs.items()
                        if any(ref not in params for ref in names))   # the environment
    non_identity.update(("exp.id", "exp.log_file"))
    changed = True
    while changed:  # close over references: a value computed from a host value is one too
        changed = False
        for name, names in refs.items():
            if name not in non_identity and names & non_identity:
                non_identity.add(name)
                changed = True
    plain = {name: definition.value for name, definition in params.items() if not refs[name]}
    depths, sources = derivations(refs)
    when_set = frozenset(name for name, definition in params.items() if definition.when_set)
    return KeyRules(frozenset(non_identity), frozenset(params), plain, depths, sources,
                    when_set=when_set)


def is_identity_key(key: str, rules: KeyRules) -> bool:
    """Whether `key` is part of an experiment's identity (see the module)."""
    if key.startswith(("results.", ENV_PREFIX)) or key in OUTPUT_KEYS:
        return False
    if rules.identity is not None:
        return key in rules.identity
    return key not in rules.non_identity


def identity_items(experiment: Mapping[str, Any], rules: KeyRules) -> dict[str, Any]:
    """The identity parameters of `experiment` with their values: what its `exp.id` hashes."""
    return {key: value for key, value in experiment.items() if is_identity_key(key, rules)
            and not (value is None and key in rules.when_set)}


def device_model(record: Record) -> str | None:
    """The GPU model of a GPU experiment, else the CPU model; None when not recorded."""
    environment = record.environment
    if not environment:
        return None
    experiment = record.experiment
    gpus = experiment.get("exp.num_gpus")
    on_gpu = experiment.get("exp.device_type") == "gpu" or (
        isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0)
    model = environment.get("gpu_model" if on_gpu else "cpu_model")
    return None if model is None else str(model)


def experiment_identity(record: Record, rules: KeyRules) -> tuple[Any, ...]:
    """What makes two attempts one experiment.

    Its id (or, without one, its identity parameters) and the device model.
    """
    experiment = record.experiment
    exp_id = experiment.get("exp.id")
    if exp_id in (None, ""):
        identity = exact_json.dumps(identity_items(experiment, rules), sort_keys=True)
        return ("params", identity, device_model(record))
    return ("id", str(exp_id), device_model(record))


# -- the same over columns (results/columns.py): what reports and comparisons use -----------

def column_of(attempts: Attempts, key: str) -> Column:
    """`key` over `attempts`; `env.*` from their environment, the device model computed."""
    if key == DEVICE_MODEL:
        return attempts.derived(DEVICE_MODEL, _device_models)
    return attempts.column(key)


def numbers_of(attempts: Attempts, key: str) -> np.ndarray:
    """`key`'s finite numbers over `attempts` (NaN elsewhere)."""
    if key == DEVICE_MODEL:
        return finite_numbers(column_of(attempts, key))
    return attempts.numbers(key)


def has_value_of(attempts: Attempts, key: str) -> np.ndarray:
    """Where `key` has a value that is not None."""
    if key == DEVICE_MODEL:
        return column_of(attempts, key).codes != 0
    return attempts.has_value(key)


def per_code(column: Column, convert: Any, dtype: Any = object) -> np.ndarray:
    """`convert(value)` of each code's value, as an array to index with the codes."""
    return np.array([convert(value) for value in column.values], dtype=dtype)


def _device_models(attempts: Attempts) -> Column:
    device = attempts.column("exp.device_type")
    gpus = attempts.column("exp.num_gpus")
    on_gpu = per_code(device, lambda value: value == "gpu", bool)[device.codes] | per_code(
        gpus, lambda value: isinstance(value, int) and not isinstance(value, bool)
        and value > 0, bool)[gpus.codes]
    gpu, cpu = attempts.column("env.gpu_model"), attempts.column("env.cpu_model")
    pairs = np.where(on_gpu, gpu.codes, -1 - cpu.codes)
    distinct, inverse = np.unique(pairs, return_inverse=True)
    models = []
    for pair in distinct.tolist():
        model = gpu.values[pair] if pair >= 0 else cpu.values[-1 - pair]
        models.append(None if model is None else str(model))
    texts = Column.of(models)
    return Column(texts.codes[inverse.reshape(-1)], None, texts.values)


def experiment_codes(attempts: Attempts, rules: KeyRules) -> np.ndarray:
    """Per attempt, a number for its experiment (as `experiment_identity` tells them apart)."""
    ids = column_of(attempts, "exp.id")
    codes = ids.codes.astype(np.int64)
    empty = ids.find("")
    missing = codes == 0 if empty is None else (codes == 0) | (codes == empty)
    if missing.any():
        rows = np.flatnonzero(missing)
        identities = Column.of([exact_json.dumps(identity_items(record.experiment, rules),
                                                 sort_keys=True)
                                for record in attempts.records(rows)])
        codes[rows] = int(codes.max(initial=0)) + identities.codes
    device = column_of(attempts, DEVICE_MODEL).codes
    combined = codes * (int(device.max(initial=0)) + 1) + device
    return np.unique(combined, return_inverse=True)[1].reshape(-1)
