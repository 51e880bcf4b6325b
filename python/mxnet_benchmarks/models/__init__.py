"""Model definitions, one file per family; importing this package registers them all.

Adding a model means adding one file here with a class decorated by
`@register_model("<id>", ...)`; every module of this folder is imported below, so nothing
else changes.
"""

from __future__ import annotations

import importlib
import pkgutil

from .registry import Model, create_model, load_model_file, model_ids, register_model

__all__ = ["Model", "create_model", "load_model_file", "model_ids", "register_model"]

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "registry":
        importlib.import_module(f"{__name__}.{_module.name}")
