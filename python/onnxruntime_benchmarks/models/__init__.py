"""The model layer: which ONNX file a run uses (files.py) and the model ids (registry.py)."""

from .files import ModelFile, resolve_model

__all__ = ["ModelFile", "resolve_model"]
