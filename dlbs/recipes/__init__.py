"""From a resolved experiment to what an execution target runs.

`invocation_for(experiment)` returns the complete `Invocation` (argv, environment, GPUs,
mounts, the target and its request), built by the framework's recipe (`launchers/`,
installed as `dlbs.launchers`, found through the `dlbs.recipes` entry points) plus what all
frameworks share. This package sits below the run layer: `dlbs.run` imports it, never the
other way round.
"""

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
