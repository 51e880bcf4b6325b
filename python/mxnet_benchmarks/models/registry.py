"""The model registry: each model file declares the ids it implements with `@register_model`.

A model class describes one network family; it is constructed with the id it was asked for
(`resnet50`, `vgg16`, ...) and builds a Gluon `HybridBlock` on demand. Registering an id twice
is a programming error and raises at import time.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from benchmark_common.extra_models import import_model_file
from mxnet import gluon

from ..errors import BenchmarkError


class Model:
    """Base class of every registered model: shapes, title and the training loss.

    Subclasses set `input_shape` (batch excluded), `num_classes` and `title` in `__init__`
    and implement `build()`, whose last layer has `self.num_classes` outputs (`--num_classes`
    changes it after `__init__`); an image model's `input_shape` (3, H, W) is also the size
    images are preprocessed to. The network returns logits; the loss is applied outside it so
    that inference runs the bare network.
    """

    input_shape: tuple[int, ...]
    num_classes: int
    title: str
    #: Whether ImageRecordIter (3-channel JPEG records) can feed this model.
    accepts_images: bool = True

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id

    def build(self) -> gluon.HybridBlock:
        """Return a new, uninitialised network for this id."""
        raise NotImplementedError

    def output_shape(self, batch_size: int) -> tuple[int, ...]:
        """The shape of the network's output for a batch of `batch_size`."""
        return (batch_size, self.num_classes)

    def loss(self) -> gluon.loss.Loss:
        """The training loss, called as `loss(output, labels)`."""
        return gluon.loss.SoftmaxCrossEntropyLoss()

    def synthetic_labels(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Random labels with the shape and range the loss expects."""
        return rng.integers(0, self.num_classes, size=(batch_size,)).astype(np.float32)


_MODELS: dict[str, type[Model]] = {}


def register_model(*model_ids: str) -> Callable[[type[Model]], type[Model]]:
    """Class decorator: register `cls` as the implementation of `model_ids`."""

    def decorate(cls: type[Model]) -> type[Model]:
        for model_id in model_ids:
            if model_id in _MODELS:
                raise RuntimeError(
                    f"model id {model_id!r} registered twice: by {_MODELS[model_id].__name__}"
                    f" and {cls.__name__}"
                )
            _MODELS[model_id] = cls
        cls.model_ids = tuple(model_ids)
        return cls

    return decorate


def load_model_file(path: str) -> None:
    """Import a user's Python file that registers more models (`--extra_models`).

    The file imports `register_model` and `Model` from `mxnet_benchmarks.models`.
    """
    import_model_file(path, BenchmarkError)


def model_ids() -> list[str]:
    """Every registered id, sorted."""
    return sorted(_MODELS)


def create_model(model_id: str, num_classes: int = 0) -> Model:
    """The model registered as `model_id`, with `num_classes` classes where not 0.

    A model's `build()` sizes its last layer by `self.num_classes`, which is set here after
    the model's own `__init__` (`--num_classes`). An unknown id is a BenchmarkError listing
    the known ones.
    """
    try:
        cls = _MODELS[model_id]
    except KeyError:
        raise BenchmarkError(
            f"unknown model {model_id!r}; known models: {', '.join(model_ids())}"
        ) from None
    model = cls(model_id)
    if num_classes:
        model.num_classes = num_classes
    return model
