"""From a resolved experiment to what an execution target runs.

`invocation_for(experiment)` returns the complete `Invocation` (argv, environment, GPUs,
mounts, the target and its request), built by the framework's recipe (`launchers/`,
installed as `dlbs.launchers`, found through the `dlbs.recipes` entry points) plus what all
frameworks share. This package sits below the run layer: `dlbs.run` imports it, never the
other way round.

The names below are imported from their modules when first asked for: a process that needs
one module of the package (`dlbs plan` reads the recipes' Docker flags) does not import the
others, nor compile the methods of the `Invocation` dataclasses (about 11 million
instructions, a tenth of the start of `dlbs plan`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dlbs.recipes.build import assemble, invocation_for, launcher_prefix
    from dlbs.recipes.invocation import (
        DOCKER,
        LOCAL,
        SLURM,
        BatchRequest,
        ContainerSpec,
        Invocation,
        Mount,
    )
    from dlbs.recipes.recipe import Recipe, recipe_for, recipes, register_recipe
    from dlbs.recipes.schedulers import register_scheduler, target_name

__all__ = [
    "DOCKER", "LOCAL", "SLURM", "BatchRequest", "assemble", "ContainerSpec", "Invocation", "Mount",
    "Recipe", "invocation_for", "launcher_prefix", "recipe_for", "recipes",
    "register_recipe", "register_scheduler", "target_name",
]

#: The module of each name of `__all__`.
_MODULES = {
    **dict.fromkeys(("assemble", "invocation_for", "launcher_prefix"), "build"),
    **dict.fromkeys(("DOCKER", "LOCAL", "SLURM", "BatchRequest", "ContainerSpec", "Invocation",
                     "Mount"), "invocation"),
    **dict.fromkeys(("Recipe", "recipe_for", "recipes", "register_recipe"), "recipe"),
    **dict.fromkeys(("register_scheduler", "target_name"), "schedulers"),
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
