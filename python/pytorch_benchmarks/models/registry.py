"""The model registry: every model file declares the ids it implements with a decorator.

A builder takes the class count as a keyword, ``num_classes`` (then ``--num_classes`` can
change it), or takes nothing (a model of the registered class count only).

A transformer over token ids registers a ``SequenceSpec`` too; its module then offers what
the backend's sequence training uses (docs/transformers.md): ``layers`` (the blocks: the
units of per-block compilation, sharding and checkpointing), ``hidden_states(tokens)``,
``head_loss(hidden, targets)``, ``loss(tokens, targets)`` and ``init_weights()`` (the
backend builds it on the meta device and initialises it where it runs).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch.nn as nn
from benchmark_common.extra_models import import_model_file

from ..errors import UserError


@dataclass(frozen=True)
class SequenceSpec:
    """What the backend needs of a transformer over token ids besides its module."""

    #: "causal_lm" (next-token targets [B, T]) or "masked_lm" (BERT's masked positions,
    #: their ids and next-sentence labels).
    objective: str
    vocab_size: int
    #: The context the model was published with; a longer exp.seq_len is refused.
    max_seq_len: int
    #: The sequence length when none is given.
    default_seq_len: int
    #: Training FLOPs per token at a sequence length (forward: a third of it).
    flops_per_token: Callable[[int], float]
    #: The parameter count (the published one: tested).
    num_params: int


@dataclass(frozen=True)
class ModelSpec:
    """What the runner needs to know about a model id, besides how to build it."""

    model_id: str
    title: str
    #: One sample's shape; an image model's (3, H, W) is also the size images are
    #: preprocessed to (real data, evaluation datasets, --predict).
    input_shape: tuple[int, ...]
    num_classes: int
    builder: Callable[..., nn.Module]
    #: A transformer over token ids; None for the other models.
    sequence: SequenceSpec | None = None

    @property
    def is_image_model(self) -> bool:
        """True for models that take a 3xHxW image (real datasets feed only those)."""
        return len(self.input_shape) == 3 and self.input_shape[0] == 3

    @property
    def takes_num_classes(self) -> bool:
        """Whether the builder takes the class count (``num_classes``)."""
        try:
            parameters = inspect.signature(self.builder).parameters
        except (TypeError, ValueError):
            return False
        return "num_classes" in parameters or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())

    def build(self) -> nn.Module:
        """A new model with this spec's class count, randomly initialised."""
        if self.takes_num_classes:
            return self.builder(num_classes=self.num_classes)
        return self.builder()

    def with_classes(self, num_classes: int | None) -> ModelSpec:
        """The spec with another class count (None or 0: the registered one)."""
        if not num_classes or num_classes == self.num_classes:
            return self
        if not self.takes_num_classes:
            raise UserError(f"--num_classes {num_classes}: model {self.model_id} has "
                            f"{self.num_classes} classes only (its builder takes no "
                            f"num_classes argument)")
        return dataclasses.replace(self, num_classes=num_classes)


_REGISTRY: dict[str, ModelSpec] = {}
_LOADED_BUILTINS = False


class UnknownModelError(UserError):
    """The requested id is not registered; the message lists the known ids."""


def register_model(
    model_id: str, *, title: str, input_shape: tuple[int, ...], num_classes: int,
    sequence: SequenceSpec | None = None,
) -> Callable[[Callable[[], nn.Module]], Callable[[], nn.Module]]:
    """Register a builder under ``model_id``; a duplicate id raises.

    ``num_classes`` is the model's class count; a builder that takes a ``num_classes``
    keyword is called with it (or with ``--num_classes``), one that takes no argument builds
    that many classes itself. A transformer over token ids gives its ``sequence`` spec
    (its vocabulary as ``num_classes``, its default sequence as ``input_shape``).
    """

    def decorator(build: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        if model_id in _REGISTRY:
            raise ValueError(f"model id {model_id!r} is registered twice")
        _REGISTRY[model_id] = ModelSpec(model_id, title, tuple(input_shape), num_classes, build,
                                        sequence)
        return build

    return decorator


def register_sequence_models(flavors: Mapping[str, Any], titles: Mapping[str, str],
                             build: Callable[[Any], nn.Module], objective: str,
                             default_seq_len: Callable[[Any], int],
                             flops_per_token: Callable[[Any, int], float],
                             num_params: Callable[[Any], int]) -> None:
    """Register each flavour of a transformer family: its config's model and SequenceSpec.

    ``default_seq_len``, ``flops_per_token`` and ``num_params`` take the flavour's config.
    """
    for model_id, config in flavors.items():
        sequence = SequenceSpec(
            objective=objective, vocab_size=config.vocab_size, max_seq_len=config.max_seq_len,
            default_seq_len=default_seq_len(config),
            flops_per_token=functools.partial(flops_per_token, config),
            num_params=num_params(config))
        register_model(model_id, title=titles[model_id], input_shape=(sequence.default_seq_len,),
                       num_classes=config.vocab_size, sequence=sequence)(
            functools.partial(build, config))


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
    import_model_file(str(path), UserError)


def model_ids() -> list[str]:
    """Every registered id, sorted."""
    _load_builtin_models()
    return sorted(_REGISTRY)


def get_model_spec(model_id: str, num_classes: int | None = None) -> ModelSpec:
    """The spec of ``model_id`` (with ``num_classes`` classes where given and not 0).

    An unknown id raises with the list of known ids.
    """
    _load_builtin_models()
    try:
        spec = _REGISTRY[model_id]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownModelError(f"unknown model {model_id!r}; known models: {known}") from None
    return spec.with_classes(num_classes)
