"""Trained weights for a registered model (``--weights``): a state dict saved by torch.save."""

from __future__ import annotations

import pickle

import torch
import torch.nn as nn

from .errors import UserError


class WeightsError(UserError):
    """Weights that cannot be read, or that do not fit the model."""


def load_weights(model: nn.Module, path: str, model_id: str) -> None:
    """Load a state dict into ``model`` (strictly: every key, every shape).

    Accepted: ``torch.save(model.state_dict())``, a checkpoint holding it under
    ``state_dict`` or ``model``, and keys prefixed ``module.`` (DistributedDataParallel).
    Only tensors are read (``weights_only``): the file cannot run code.
    """
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise WeightsError(f"--weights {path}: no such file") from None
    except IsADirectoryError:
        raise WeightsError(f"--weights {path}: a directory, not a file") from None
    except (RuntimeError, pickle.UnpicklingError, EOFError, ValueError, OSError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise WeightsError(f"--weights {path}: not a PyTorch state dict ({reason})") from None
    if isinstance(state, dict):
        for key in ("state_dict", "model"):
            if isinstance(state.get(key), dict):
                state = state[key]
                break
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise WeightsError(f"--weights {path}: not a state dict (a mapping of parameter names "
                           "to tensors)")
    if state and all(key.startswith("module.") for key in state):
        state = {key[len("module."):]: value for key, value in state.items()}
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        detail = " ".join(lines[1:3]) if len(lines) > 1 else lines[0] if lines else ""
        raise WeightsError(f"--weights {path} do not fit model {model_id}: {detail}") from None
