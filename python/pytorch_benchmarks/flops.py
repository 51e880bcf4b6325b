"""FLOPs per sample of a model, counted by PyTorch's own flop counter (docs/efficiency.md).

`torch.utils.flop_counter.FlopCounterMode` counts the floating-point operations of matrix
products, convolutions and attention from their shapes: FLOPs = 2 x multiply-adds (one
multiply and one add each). Element-wise operations, normalisation and pooling are not
counted, as in the usual definition of model FLOPs utilisation. Forward: one forward pass.
Training: forward + backward as the counter counts them, the backward of a product or a
convolution being its two gradients (input and weight; the first layer's input gradient is
never computed), so about three times the forward.

The count runs on the meta device: the model is built there and the passes go through
autograd with shapes only, so it takes no device memory and no device time and never
touches the timed run. It is done once per model, phase and input shape in a process
(`functools.cache`); the count does not depend on the dtype or the batch (a batch of two
is counted and halved: one sample would break batch normalisation in training mode).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn as nn

#: Samples in the batch the counter sees (see the module doc).
COUNT_BATCH = 2


def count_flops_per_sample(build: Callable[[], nn.Module], input_shape: Sequence[int],
                           training: bool) -> tuple[float, float]:
    """(forward FLOPs, FLOPs of the phase) per sample of the model `build()` makes.

    Training's backward starts from the sum of the outputs: the loss adds no product or
    convolution, so its choice does not change the count.
    """
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = build()
    model.train(training)
    inputs = torch.empty((COUNT_BATCH, *input_shape), device="meta")
    with torch.set_grad_enabled(training):
        with FlopCounterMode(display=False) as forward_counter:
            outputs = model(inputs)
        forward = forward_counter.get_total_flops()
        if not training:
            return forward / COUNT_BATCH, forward / COUNT_BATCH
        with FlopCounterMode(display=False) as backward_counter:
            sum(tensor.float().sum() for tensor in _tensors(outputs)).backward()
    total = forward + backward_counter.get_total_flops()
    return forward / COUNT_BATCH, total / COUNT_BATCH


def _tensors(outputs: Any) -> list[torch.Tensor]:
    """The tensors a model's output holds (one, or a tuple such as Inception's auxiliary)."""
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    return [item for item in outputs if isinstance(item, torch.Tensor)]


@functools.cache
def _cached_count(model_id: str, input_shape: tuple, training: bool) -> tuple[float, float]:
    from .models import get_model_spec

    spec = get_model_spec(model_id)
    return count_flops_per_sample(spec.build, input_shape, training)


def gpu_model_result(device: torch.device) -> dict[str, Any]:
    """``results.gpu_model``: the GPU's name, the key of the peak table (no key on the CPU)."""
    if device.type == "cuda":
        return {"results.gpu_model": torch.cuda.get_device_name(device)}
    return {}


def flops_results(model_id: str, input_shape: Sequence[int], training: bool,
                  device: torch.device) -> dict[str, Any]:
    """The protocol's FLOP keys of a run, and the GPU's name (the peak table's key).

    A model the counter cannot build or run on the meta device gets no FLOP keys, but
    `results.flops_unavailable` with the reason: a benchmark never fails for its count.
    """
    results = gpu_model_result(device)
    try:
        forward, total = _cached_count(model_id, tuple(input_shape), training)
    except Exception as error:  # noqa: BLE001 - any model, any failure: say why, go on
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        results["results.flops_unavailable"] = (
            f"torch.utils.flop_counter could not count {model_id} on the meta device: "
            f"{type(error).__name__}: {reason}")
        return results
    results["results.flops_forward_per_sample"] = forward
    results["results.flops_per_sample"] = total
    return results
