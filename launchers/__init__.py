"""Framework recipes: a resolved experiment -> the Invocation that runs its backend.

One module per framework registers a recipe with `@register_recipe(name)`; `recipe_for`
finds it by `exp.framework`. A recipe never builds a shell string: argv is a list of tokens
from the experiment's argument lists, each split as a POSIX shell splits words.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from dlbs.errors import LaunchError
from dlbs.run.invocation import Invocation, requested_gpus, tokens

Experiment = Mapping[str, Any]

#: Where a container sees the backends (DLBS's layout): /workspace/<folder>.
WORKSPACE = "/workspace"
BUILTIN = ("launchers.pytorch", "launchers.mxnet", "launchers.dummy")


class Recipe:
    """Builds the invocation of one framework's backend; subclasses add what differs."""

    name = ""
    #: The backend's folder name inside the container (`/workspace/<folder>`).
    container_folder = ""
    script = "benchmarks.py"

    def invocation(self, experiment: Experiment) -> Invocation:
        """The backend's command, environment and GPUs for one experiment."""
        return Invocation(argv=self.command(experiment), env=self.environment(experiment),
                          gpus=requested_gpus(experiment),
                          nodes=int(experiment.get("exp.num_nodes") or 1))

    # -- pieces subclasses reuse ---------------------------------------------------------
    def in_container(self, experiment: Experiment) -> bool:
        return bool(experiment.get("exp.docker"))

    def python(self, experiment: Experiment) -> str:
        configured = str(experiment.get("runtime.python") or "")
        if configured:
            return configured
        return "python3" if self.in_container(experiment) else sys.executable

    def backend_dir(self, experiment: Experiment) -> str:
        if self.in_container(experiment):
            return f"{WORKSPACE}/{self.container_folder}"
        path = experiment.get(f"{self.name}.bench_path")
        if not path:
            raise LaunchError(f"experiment {experiment.get('exp.id')}: {self.name}.bench_path "
                              f"is empty", hint=f"set it to the folder of the {self.name} "
                                                f"backend")
        return str(path)

    def backend_args(self, experiment: Experiment) -> list[str]:
        name = f"{self.name}.args"
        return tokens(experiment.get(name), name)

    def command(self, experiment: Experiment) -> list[str]:
        return [self.python(experiment), f"{self.backend_dir(experiment)}/{self.script}",
                *self.backend_args(experiment)]

    def environment(self, experiment: Experiment) -> dict[str, str]:
        env = experiment.get(f"{self.name}.env") or {}
        if not isinstance(env, Mapping):
            raise LaunchError(f"{self.name}.env must be an object of NAME: value")
        return {str(k): _env_text(v) for k, v in env.items() if v is not None}

    def docker_args(self, experiment: Experiment) -> Any:
        """The complete `docker run` flags: the framework's list includes exp.docker_args."""
        return experiment.get(f"{self.name}.docker_args", experiment.get("exp.docker_args"))


def _env_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_REGISTRY: dict[str, Recipe] = {}
R = TypeVar("R", bound=type[Recipe])


def register_recipe(name: str) -> Callable[[R], R]:
    """Class decorator: the recipe of framework `name` (a duplicate name is an error)."""

    def decorate(cls: R) -> R:
        if name in _REGISTRY:
            raise ValueError(f"recipe {name!r} is already registered")
        cls.name = name
        _REGISTRY[name] = cls()
        return cls

    return decorate


def recipes() -> dict[str, Recipe]:
    for module in BUILTIN:
        importlib.import_module(module)
    return dict(_REGISTRY)


def recipe_for(experiment: Experiment) -> Recipe:
    framework = str(experiment.get("exp.framework") or "")
    known = recipes()
    if framework not in known:
        raise LaunchError(f"experiment {experiment.get('exp.id')}: no recipe for framework "
                          f"{framework!r}", hint=f"frameworks: {', '.join(sorted(known))}")
    return known[framework]
