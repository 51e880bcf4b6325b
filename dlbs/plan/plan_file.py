"""Plan files (`dlbs plan -o FILE`, run by `dlbs run --plan FILE`), read and checked.

A plan file is data from outside: it may have been edited, truncated or written by hand.
So it is checked as the planner checks its own output (docs/language.md section 6 and
docs/security.md): every name follows the rule of names; every value is plain data; a value
of a parameter that the default configs declare has that type (an int may stand for a
float) and passes its choices, regex, min and max; no rule of the default configs (an
extension with `error`) matches an experiment; ids and log paths are contained as in
`containment.py`; ids are unique; and the plan is no larger than `sys.max_experiments`.
The first problem is one PlanError naming the file and the experiment.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Mapping
from typing import Any

from dlbs.config.documents import unique_keys
from dlbs.config.limits import MAX_PLAN_BYTES
from dlbs.config.loader import load_spec
from dlbs.config.names import NAME_RULE, is_name
from dlbs.config.spec import Extension, ParamDef, Spec
from dlbs.config.values import check_plain, render, short
from dlbs.errors import ConfigError, PlanError
from dlbs.plan.builder import ID, MAX_EXPERIMENTS, condition_holds, max_experiments
from dlbs.plan.containment import contain
from dlbs.plan.resolver import check_value


def read_plan(path: str | os.PathLike[str], spec: Spec | None = None) -> list[dict[str, Any]]:
    """The checked experiments of a plan file (a JSON list, or one JSON object per line).

    `spec` holds the declarations and rules to check against (default: the default configs).
    """
    where = os.fspath(path)
    experiments = parse_plan(_read(where), where)
    return validate_plan(experiments, where, load_spec(None) if spec is None else spec)


def _read(path: str) -> bytes:
    """The bytes of a regular file or a pipe (`--plan <(dlbs plan ...)`), bounded."""
    try:
        with open(path, "rb") as stream:
            mode = os.fstat(stream.fileno()).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
                kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file or a pipe"
                raise PlanError(f"{path}: cannot read the plan: it is {kind}")
            data = stream.read(MAX_PLAN_BYTES + 1)
    except IsADirectoryError:
        raise PlanError(f"{path}: cannot read the plan: it is a folder") from None
    except OSError as error:
        raise PlanError(f"{path}: cannot read the plan: {error.strerror or error}") from None
    if len(data) > MAX_PLAN_BYTES:
        raise PlanError(f"{path}: the plan is larger than {MAX_PLAN_BYTES / 2**20:g} MiB, the "
                        f"most a plan file may be",
                        hint="split the sweep into several plans (docs/security.md)")
    return data


def parse_plan(data: bytes, where: str) -> list[Any]:
    """The JSON values of a plan file: one list, or one value per non-blank line.

    Python's json reads it (integers beyond 64 bits stay exact, to be refused as too large
    rather than rounded), through `_Objects`: a key twice in one object is refused, as YAML
    refuses it, and equal texts are one object, so that a plan's thousands of experiments
    share their values in memory.
    """
    objects = _Objects()
    try:
        if data.lstrip().startswith(b"["):
            experiments = _loads(data.decode("utf-8"), objects)
        else:
            experiments = [_loads(line.decode("utf-8"), objects)
                           for line in data.splitlines() if line.strip()]
    except (ValueError, RecursionError) as error:  # JSONDecodeError, UnicodeDecodeError too
        reason = " ".join(str(error).split())[:200] or "nested too deeply"
        raise PlanError(f"{where}: not a plan written by `dlbs plan`: {reason}") from None
    if not isinstance(experiments, list):
        raise PlanError(f"{where}: a plan is a list of experiment objects")
    return experiments


def _loads(text: str, objects: _Objects) -> Any:
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite,
                      object_pairs_hook=objects)


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e400
        raise ValueError(f"{text[:40]} is beyond the range of a float")
    return number


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


class _Objects:
    """The objects of a plan as they are read: unique keys, shared texts (see `parse_plan`)."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        made = unique_keys(pairs)
        texts = self._texts
        for key, value in pairs:
            if type(value) is str:
                made[key] = texts.setdefault(value, value)
        return made


def validate_plan(experiments: list[Any], where: str, spec: Spec) -> list[dict[str, Any]]:
    """Check every experiment as the module doc says; the experiments, log paths normalised."""
    limit = max_experiments(spec)
    if len(experiments) > limit:
        raise PlanError(f"{where}: the plan has {len(experiments):,} experiments, more than "
                        f"{MAX_EXPERIMENTS} ({limit:,})")
    declared = {name: definition for name, definition in spec.params.items()
                if _checks_something(definition)}
    rules = [extension for extension in spec.extensions if extension.error is not None]
    checked: dict[tuple[str, Any], Any] = {}
    seen: dict[Any, int] = {}
    for index, experiment in enumerate(experiments, start=1):
        if not isinstance(experiment, dict):
            raise PlanError(f"{where}: experiment #{index} is not an object")
        label = f"#{index}" + (f" {experiment[ID]}" if isinstance(experiment.get(ID), str) and
                               len(experiment[ID]) <= 64 else "")
        try:
            _check_experiment(experiment, declared, rules, checked)
            contain(experiment, "")
        except (ConfigError, PlanError) as error:
            raise PlanError(f"{where}: experiment {label}: {error.message}",
                            hint=error.hint) from None
        identity = experiment.get(ID)
        if identity is not None:
            first = seen.setdefault(identity, index)
            if first != index:
                raise PlanError(f"{where}: experiments #{first} and #{index} have the same "
                                f"{ID} {identity!r}", hint="an id names one experiment")
    return experiments


def _checks_something(definition: ParamDef) -> bool:
    return (definition.type is not None or definition.choices is not None or
            definition.regex is not None or definition.minimum is not None or
            definition.maximum is not None)


def _check_experiment(experiment: dict[str, Any], declared: Mapping[str, ParamDef],
                      rules: list[Extension], checked: dict[tuple[str, Any], Any]) -> None:
    """Check one experiment; `checked` remembers the texts and integers that passed.

    A plan's experiments repeat most of their values: each (name, value) is checked once.
    """
    for name, value in experiment.items():
        kind = type(value)
        if kind is str or kind is int:
            known = checked.get((name, value), checked)
            if known is not checked:
                experiment[name] = known
                continue
        if not is_name(name):
            shown = repr(name) if len(name) <= 60 else repr(name[:57]) + "..."
            raise ConfigError(f"invalid parameter name {shown}", hint=NAME_RULE)
        given = value
        try:
            if type(value) is not int:  # an int is checked against min and max first
                check_plain(value)
            definition = declared.get(name)
            if definition is not None and value is not None:
                value = experiment[name] = _as_declared(definition, value)
            check_plain(value)
        except ConfigError as error:
            raise ConfigError(f"parameter {name!r}: {error.message}", hint=error.hint) \
                from None
        if kind is str or kind is int:
            checked[(name, given)] = value
    for rule in rules:
        if all(_holds(experiment, name, test) for name, test in rule.condition.items()):
            tested = ", ".join(f"{name}={render(experiment[name])}" for name in rule.condition)
            raise ConfigError(f"{rule.error} ({tested})", hint=f"the rule is {rule.source}")


def _as_declared(definition: ParamDef, value: Any) -> Any:
    """The value if it already has the declared type (an int for a float too), checked."""
    checked = check_value(definition, value)
    if type(checked) is not type(value) and not (definition.type == "float" and
                                                 type(value) is int):
        raise ConfigError(f"{short(value, 60)} is not a {definition.type}",
                          hint="a plan holds values as `dlbs plan` wrote them")
    return checked


def _holds(experiment: dict[str, Any], name: str, test: Any) -> bool:
    """A rule's test of one name, as the planner applies it (docs/language.md section 7)."""
    return name in experiment and condition_holds(test, experiment[name])


