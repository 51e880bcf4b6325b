"""The request of the `slurm` scheduler: the `slurm.*` parameters, read once, checked."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dlbs.errors import LaunchError
from dlbs.recipes.invocation import (
    SLURM,
    BatchRequest,
    Invocation,
    experiment_label,
    positive_int,
    tokens,
)
from dlbs.recipes.schedulers import register_scheduler
from dlbs.util.booleans import truthy

Experiment = Mapping[str, Any]


@register_scheduler(SLURM)
def batch_request(experiment: Experiment, invocation: Invocation) -> BatchRequest:
    """The `slurm.*` request; it must hold the nodes and tasks the recipe needs."""
    nodes = positive_int(experiment, "slurm.nodes", invocation.nodes)
    ntasks = positive_int(experiment, "slurm.ntasks_per_node", invocation.tasks_per_node)
    if invocation.nodes > nodes or invocation.tasks_per_node > ntasks:
        raise LaunchError(
            f"experiment {invocation.label}: the recipe needs {invocation.nodes} node(s) x "
            f"{invocation.tasks_per_node} task(s), but slurm.nodes={nodes} and "
            f"slurm.ntasks_per_node={ntasks}",
            hint="raise slurm.nodes or slurm.ntasks_per_node, or leave them unset")
    gres = str(experiment.get("slurm.gres") or "")
    gpus = experiment.get("slurm.gpus_per_node")
    if gpus in (None, ""):
        gpus = 0 if gres else len(invocation.gpus)
    gpus_per_node = _non_negative(gpus, "slurm.gpus_per_node", invocation)
    if gres and gpus_per_node:
        raise LaunchError(f"experiment {invocation.label}: slurm.gres ({gres}) and "
                          f"slurm.gpus_per_node ({gpus_per_node}) both request GPUs",
                          hint="give one: set slurm.gpus_per_node: 0 to use slurm.gres")
    prologue = experiment.get("slurm.prologue") or []
    if not isinstance(prologue, list | tuple):
        prologue = [prologue]
    return BatchRequest(nodes=nodes, ntasks_per_node=ntasks,
                        partition=str(experiment.get("slurm.partition") or ""),
                        account=str(experiment.get("slurm.account") or ""),
                        time=_time_limit(experiment),
                        gpus_per_node=gpus_per_node,
                        extra_args=tokens(experiment.get("slurm.extra_args"),
                                          "slurm.extra_args"),
                        cpus_per_task=_non_negative(experiment.get("slurm.cpus_per_task") or 0,
                                                    "slurm.cpus_per_task", invocation),
                        mem=str(experiment.get("slurm.mem") or ""), gres=gres,
                        qos=str(experiment.get("slurm.qos") or ""),
                        exclusive=truthy(experiment.get("slurm.exclusive", False)),
                        prologue=[str(line) for line in prologue if str(line).strip()],
                        queue_timeout=_seconds(experiment, "slurm.queue_timeout"))


def _time_limit(experiment: Experiment) -> str:
    """slurm.time as given, else exp.timeout rounded up to minutes, plus one as a margin."""
    given = experiment.get("slurm.time")
    if given not in (None, "", 0):
        return str(given)
    try:
        timeout = float(experiment.get("exp.timeout") or 0)
    except (TypeError, ValueError):
        raise LaunchError(f"exp.timeout: expected seconds, got {experiment.get('exp.timeout')!r} "
                          f"(experiment {experiment_label(experiment)})") from None
    return str(math.ceil(timeout / 60) + 1) if timeout > 0 else ""


def _seconds(experiment: Experiment, name: str) -> float:
    """A duration parameter in seconds (0 when unset); the planner checked its type."""
    try:
        value = float(experiment.get(name) or 0)
    except (TypeError, ValueError):
        raise LaunchError(f"{name}: expected seconds, got {experiment.get(name)!r} "
                          f"(experiment {experiment_label(experiment)})") from None
    if not math.isfinite(value) or value < 0:
        raise LaunchError(f"{name}: expected seconds, got {experiment.get(name)!r} "
                          f"(experiment {experiment_label(experiment)})")
    return value


def _non_negative(value: Any, name: str, invocation: Invocation) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if number < 0:
        raise LaunchError(f"{name}: expected a count, got {value!r} "
                          f"(experiment {invocation.label})")
    return number
