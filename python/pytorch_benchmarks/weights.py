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
        counts = other_class_count(model.state_dict(), state)
        hint = "" if counts is None else (
            f"; the weights have {counts[0]} classes, the model {counts[1]}: set "
            f"exp.num_classes to {counts[0]} (the backend's --num_classes {counts[0]})")
        if hint:
            detail = detail.rstrip(".")
        raise WeightsError(f"--weights {path} do not fit model {model_id}: {detail}{hint}"
                           ) from None


def other_class_count(expected: dict, given: dict) -> tuple[int, int] | None:
    """(the weights' classes, the model's) when only the class count differs, else None.

    That is: the same keys, and the tensors whose shapes differ (the last layer's weight and
    bias) differ only in their first dimension, all from one count to one other.
    """
    if set(expected) != set(given):
        return None
    counts = set()
    for key, tensor in expected.items():
        theirs, ours = tuple(getattr(given[key], "shape", ())), tuple(tensor.shape)
        if theirs == ours:
            continue
        if len(theirs) != len(ours) or not ours or theirs[1:] != ours[1:]:
            return None
        counts.add((theirs[0], ours[0]))
    return counts.pop() if len(counts) == 1 else None
