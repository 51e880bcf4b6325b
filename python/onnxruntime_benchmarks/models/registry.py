"""The model ids this backend runs: the PyTorch backend's, which it exports to ONNX.

`model_ids()` is what `dlbs list models` asks every backend's `models.registry`; here it
imports the PyTorch backend's registry (from the `pytorch_benchmarks` folder beside this
backend's folder), so it needs torch, as exporting does. A user's `--model_file` may be any
model, under any name.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from ..export import PYTORCH_BACKEND


def model_ids() -> list[str]:
    """Every model id of the PyTorch backend that it exports, sorted (not the transformers)."""
    folder = Path(__file__).resolve().parents[2] / PYTORCH_BACKEND
    if str(folder.parent) not in sys.path:
        sys.path.insert(0, str(folder.parent))
    models = importlib.import_module(f"{PYTORCH_BACKEND}.models")
    return [model_id for model_id in models.model_ids()
            if getattr(models.get_model_spec(model_id), "sequence", None) is None]
