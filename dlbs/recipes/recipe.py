"""Framework recipes and their registry.

A recipe knows one framework's backend: the command that runs it (a torchrun or parameter-
server launcher around it where the experiment needs one), its environment and what it
mounts. The recipes live in the repository's `launchers/` folder, installed as
`dlbs.launchers`; each module registers its recipe with `@register_recipe(name)` and is
named in the `dlbs.recipes` entry-point group (pyproject.toml), which is how `recipes()`
finds them: the run layer knows this interface, never the recipe modules. Another package
can add a framework by declaring an entry point of its own in that group.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from dlbs.errors import LaunchError
from dlbs.recipes import evaluation, tracing
from dlbs.recipes.parts import Mount, tokens
from dlbs.util.booleans import truthy

Experiment = Mapping[str, Any]

#: Where a container sees the backends (DLBS's layout): /workspace/<folder>.
WORKSPACE = "/workspace"
ENTRY_POINT_GROUP = "dlbs.recipes"
LAUNCHERS_PACKAGE = "dlbs.launchers"
#: The frameworks whose recipes dlbs ships in `launchers/` (pyproject.toml's entry points).
BUILTIN_RECIPES = ("pytorch", "mxnet", "onnxruntime", "dummy")


class Recipe:
    """Builds one framework's backend command; subclasses add what differs."""

    name = ""
    #: The backend's folder name inside the container (`/workspace/<folder>`).
    container_folder = ""
    script = "benchmarks.py"
    #: The backend only pretends to use the GPUs it is given (the dummy backend): its GPU
    #: experiments run on bare metal anywhere (dlbs/recipes/resources.py).
    simulates_devices = False

    def command(self, experiment: Experiment) -> list[str]:
        """The backend's command as tokens: interpreter, script, `<framework>.args`."""
        return [self.python(experiment), f"{self.backend_dir(experiment)}/{self.script}",
                *self.backend_args(experiment)]

    def environment(self, experiment: Experiment) -> dict[str, str]:
        """`<framework>.env`: the backend's own environment variables."""
        env = experiment.get(f"{self.name}.env") or {}
        if not isinstance(env, Mapping):
            raise LaunchError(f"{self.name}.env must be an object of NAME: value")
        return {str(k): _env_text(v) for k, v in env.items() if v is not None}

    def mounts(self, experiment: Experiment) -> list[Mount]:
        """Host paths a container must see, beyond the `docker_args` volumes (none here)."""
        return []

    def data_problem(self, experiment: Experiment, folder: str) -> tuple[str, str, str] | None:
        """Why the backend cannot read the dataset at `folder` as the experiment asks.

        `folder` is exp.data_dir, which exists on this host. The answer is (the parameter to
        change, what is wrong, what to set), or None when the backend can read it. Checked by
        `dlbs validate` and `dlbs run` before anything runs (dlbs/recipes/resources.py).
        """
        return None

    def docker_arg_tokens(self, experiment: Experiment) -> list[str]:
        """The complete `docker run` flags of a container of this framework.

        `<framework>.docker_args` (which include `exp.docker_args` by default), else
        `exp.docker_args`.
        """
        name = f"{self.name}.docker_args"
        if name not in experiment:
            name = "exp.docker_args"
        return tokens(experiment.get(name), name)

    # -- pieces subclasses reuse ---------------------------------------------------------
    def in_container(self, experiment: Experiment) -> bool:
        return truthy(experiment.get("exp.docker", False))

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
        """`<framework>.args`, then the scenario's outputs and the trace flags (when set)."""
        name = f"{self.name}.args"
        return tokens(experiment.get(name), name) + evaluation.output_flags(experiment) + \
            tracing.trace_flags(experiment)


def _env_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_REGISTRY: dict[str, Recipe] = {}
_discovered = False
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


def _discover() -> None:
    """Import every module of the `dlbs.recipes` entry-point group (once).

    Run from a source checkout that is not installed (`PYTHONPATH=checkout python -m
    dlbs.cli.main`, as on a machine where nothing can be installed), the package has no
    entry points and no `dlbs.launchers` mapping: the checkout's `launchers/` folder is then
    loaded as `dlbs.launchers`, which is what installing would map.
    """
    global _discovered
    if _discovered:
        return
    _discovered = True
    import importlib.metadata  # here: importing it costs every dlbs process ~30 ms

    entries = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    if not _launchers_importable() and _load_checkout_launchers():
        entries = [e for e in entries if not e.value.startswith(LAUNCHERS_PACKAGE + ".")]
    for entry in entries:
        try:
            entry.load()
        except Exception as error:  # noqa: BLE001 - a broken plugin is named, not fatal
            raise LaunchError(f"the recipe of framework {entry.name!r} ({entry.value}) "
                              f"cannot be loaded: {error}") from error


def _launchers_importable() -> bool:
    try:
        return importlib.util.find_spec(LAUNCHERS_PACKAGE) is not None
    except ImportError:
        return False


def _load_checkout_launchers() -> bool:
    """Load `<checkout>/launchers/*.py` as `dlbs.launchers.*`; False if there is none."""
    folder = Path(__file__).resolve().parents[2] / "launchers"
    init = folder / "__init__.py"
    if not init.is_file():
        return False
    spec = importlib.util.spec_from_file_location(
        LAUNCHERS_PACKAGE, init, submodule_search_locations=[str(folder)])
    if spec is None or spec.loader is None:
        return False
    package = importlib.util.module_from_spec(spec)
    sys.modules[LAUNCHERS_PACKAGE] = package
    spec.loader.exec_module(package)
    for module in sorted(folder.glob("*.py")):
        if module.stem != "__init__":
            importlib.import_module(f"{LAUNCHERS_PACKAGE}.{module.stem}")
    return True


def recipes() -> dict[str, Recipe]:
    """Every registered recipe by framework name."""
    _discover()
    return dict(_REGISTRY)


def _load_builtin(framework: str) -> None:
    """Import the recipe of a framework dlbs ships, without scanning the entry points.

    Reading every installed package's entry points (`_discover`) is most of a short `dlbs`
    process's start; a built-in recipe's module is known. Any other name, or a checkout
    whose launchers are not importable, goes through `_discover` as before.
    """
    if framework in BUILTIN_RECIPES and _launchers_importable():
        importlib.import_module(f"{LAUNCHERS_PACKAGE}.{framework}")


def recipe_for(experiment: Experiment) -> Recipe:
    """The recipe of the experiment's `exp.framework`."""
    framework = str(experiment.get("exp.framework") or "")
    if framework not in _REGISTRY and not _discovered:
        _load_builtin(framework)
    if framework in _REGISTRY:
        return _REGISTRY[framework]
    known = recipes()
    if framework not in known:
        hint = (f"frameworks: {', '.join(sorted(known))}" if known else
                "no recipes are installed: install dlbs (pip install -e .) so that its "
                f"{ENTRY_POINT_GROUP} entry points exist")
        raise LaunchError(f"experiment {experiment.get('exp.id')}: no recipe for framework "
                          f"{framework!r}", hint=hint)
    return known[framework]
