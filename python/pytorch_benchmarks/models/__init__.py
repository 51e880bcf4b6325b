"""Models, one file per family; each registers its ids with ``@register_model``."""

from .registry import (
    ModelSpec,
    SequenceSpec,
    UnknownModelError,
    get_model_spec,
    load_model_file,
    model_ids,
    register_model,
)

__all__ = [
    "ModelSpec",
    "SequenceSpec",
    "UnknownModelError",
    "get_model_spec",
    "load_model_file",
    "model_ids",
    "register_model",
]
