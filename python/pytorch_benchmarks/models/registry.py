"""The model registry: every model file declares the ids it implements with a decorator."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch.nn as nn

from ..errors import UserError


@dataclass(frozen=True)
class ModelSpec:
    """What the runner needs to know about a model id, besides how to build it."""

    model_id: str
    title: str
    input_shape: tuple[int, ...]
    num_classes: int
    build: Callable[[], nn.Module]

    @property
    def is_image_model(self) -> bool:
        """True for models that take a 3xHxW image (real datasets feed only those)."""
        return len(self.input_shape) == 3 and self.input_shape[0] == 3


_REGISTRY: dict[str, ModelSpec] = {}
_LOADED_BUILTINS = False


class UnknownModelError(UserError):
    """The requested id is not registered; the message lists the known ids."""


def register_model(
    model_id: str, *, title: str, input_shape: tuple[int, ...], num_classes: int
) -> Callable[[Callable[[], nn.Module]], Callable[[], nn.Module]]:
    """Register a zero-argument builder under ``model_id``; a duplicate id raises."""

    def decorator(build: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
        if model_id in _REGISTRY:
            raise ValueError(f"model id {model_id!r} is registered twice")
        _REGISTRY[model_id] = ModelSpec(model_id, title, tuple(input_shape), num_classes, build)
        return build

    return decorator


def _load_builtin_models() -> None:
    """Import every module of this package once, so that their decorators run.

    Adding a model is adding a file here: nothing else needs to change.
    """
    global _LOADED_BUILTINS
    if _LOADED_BUILTINS:
        return
    _LOADED_BUILTINS = True
    package = __name__.rpartition(".")[0]
    package_dir = Path(__file__).resolve().parent
    for module in sorted(pkgutil.iter_modules([str(package_dir)]), key=lambda m: m.name):
        if module.name != "registry":
            importlib.import_module(f"{package}.{module.name}")


def load_model_file(path: str | Path) -> None:
    """Import a user's Python file that registers more models (``--extra_models``)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"--extra_models: no such file: {path}")
    name = f"_dlbs_extra_models_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"--extra_models: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def model_ids() -> list[str]:
    """Every registered id, sorted."""
    _load_builtin_models()
    return sorted(_REGISTRY)


def get_model_spec(model_id: str) -> ModelSpec:
    """The spec of ``model_id``; an unknown id raises with the list of known ids."""
    _load_builtin_models()
    try:
        return _REGISTRY[model_id]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownModelError(f"unknown model {model_id!r}; known models: {known}") from None
