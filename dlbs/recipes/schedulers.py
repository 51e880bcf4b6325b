"""Which execution target runs an experiment, and the request its scheduler gets.

`exp.scheduler` names a batch scheduler, or `none`. With `none` the experiment runs on this
host: in a container when `exp.docker` is true (the `docker` target), else as a child process
(`local`). A scheduler registers here, with `@register_scheduler(name)`, the function that
reads its parameters into the invocation's `BatchRequest`; the run layer's target of the same
name (`dlbs.run.targets`, `@register_target(name)`) submits it. This layer sits below the run
layer, so the two registries meet by name only. The built-in schedulers' requests are in
`REQUEST_MODULES`, imported on the first lookup (docs/architecture.md: adding a scheduler).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from dlbs.errors import LaunchError
from dlbs.recipes.invocation import DOCKER, LOCAL, BatchRequest, Invocation, experiment_label
from dlbs.util.booleans import truthy

Experiment = Mapping[str, Any]
#: Reads a scheduler's parameters into the request of an invocation the recipe built.
RequestReader = Callable[[Experiment, Invocation], BatchRequest]
#: `exp.scheduler` when the experiment runs on this host.
NO_SCHEDULER = "none"
#: Modules that register the built-in schedulers' requests.
REQUEST_MODULES = ("dlbs.recipes.slurm_request",)

_REGISTRY: dict[str, RequestReader] = {}
_builtins_loaded = False


def register_scheduler(name: str) -> Callable[[RequestReader], RequestReader]:
    """Decorator: `name` is a value of `exp.scheduler`, the function reads its request."""

    def decorate(reader: RequestReader) -> RequestReader:
        if name in _REGISTRY or name == NO_SCHEDULER:
            raise ValueError(f"scheduler {name!r} is already registered")
        _REGISTRY[name] = reader
        return reader

    return decorate


def schedulers() -> dict[str, RequestReader]:
    """Every registered scheduler by name, with its request reader."""
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        for module in REQUEST_MODULES:
            importlib.import_module(module)
    return dict(sorted(_REGISTRY.items()))


def target_name(experiment: Experiment) -> str:
    """The execution target that an experiment's parameters select (see the module doc)."""
    scheduler = str(experiment.get("exp.scheduler") or NO_SCHEDULER)
    if scheduler == NO_SCHEDULER:
        return DOCKER if truthy(experiment.get("exp.docker", False)) else LOCAL
    known = schedulers()
    if scheduler not in known:
        raise LaunchError(f"exp.scheduler: unknown scheduler {scheduler!r} (experiment "
                          f"{experiment_label(experiment)})",
                          hint=f"use {' or '.join([NO_SCHEDULER, *known])}")
    return scheduler


def scheduler_request(experiment: Experiment, invocation: Invocation) -> BatchRequest | None:
    """The request of the scheduler that runs the invocation; None on this host."""
    reader = schedulers().get(invocation.target)
    return reader(experiment, invocation) if reader is not None else None
