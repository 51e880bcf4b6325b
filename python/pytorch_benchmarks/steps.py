"""What one step does: a training step (forward, loss, backward, SGD) or an inference pass."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
import torch.nn as nn

Step = Callable[[torch.Tensor, torch.Tensor], object]
#: A span of one part of a step, by name (the traced pass's; `no_phase` outside it).
Phase = Callable[[str], contextlib.AbstractContextManager]
_NO_SPAN = contextlib.nullcontext()


def no_phase(name: str) -> contextlib.AbstractContextManager:
    """No span: what the timed steps use."""
    return _NO_SPAN


def autocast_context(device: torch.device, dtype: torch.dtype) -> contextlib.AbstractContextManager:
    """Mixed precision for training: autocast to float16/bfloat16, nothing for float32."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def make_optimizer(model: nn.Module, lr: float, device: torch.device) -> torch.optim.Optimizer:
    """SGD with momentum and weight decay (the ImageNet recipe).

    On CUDA the fused implementation is used: one kernel for all parameters, and with a
    gradient scaler it takes the inf check on the device, so the step never waits for the
    host (the unfused path calls ``.item()`` on the found-inf flag every step).
    """
    fused = True if device.type == "cuda" else None
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4, fused=fused)


def make_training_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    dtype: torch.dtype,
    phase: Phase = no_phase,
) -> Step:
    """Forward and loss (under autocast for half types), backward, optimizer step.

    ``phase`` spans each of the three (the traced pass, docs/tracing.md).
    """
    criterion = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None

    def step(inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with phase("forward"), autocast_context(device, dtype):
            loss = criterion(model(inputs), labels)
        optimizer.zero_grad(set_to_none=True)
        if scaler is None:
            with phase("backward"):
                loss.backward()
            with phase("optimizer"):
                optimizer.step()
        else:
            with phase("backward"):
                scaler.scale(loss).backward()
            with phase("optimizer"):
                scaler.step(optimizer)
                scaler.update()
        return loss

    return step


def make_inference_step(model: nn.Module) -> Step:
    """A forward pass without autograd (the model is already in eval mode and its dtype)."""

    def step(inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return model(inputs)

    return step


def make_cuda_graph_step(model: nn.Module, example: torch.Tensor, warmup: int = 3) -> Step:
    """Capture one forward pass in a CUDA graph; each step copies the input in and replays it.

    The capture (and its own warm-up on a side stream, which CUDA graphs require) happens
    here, before the benchmark's warm-up, so it is never timed.
    """
    static_input = example  # later batches are copied into this buffer
    side = torch.cuda.Stream(example.device)
    side.wait_stream(torch.cuda.current_stream(example.device))
    with torch.inference_mode(), torch.cuda.stream(side):
        for _ in range(warmup):
            model(static_input)
    torch.cuda.current_stream(example.device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.inference_mode(), torch.cuda.graph(graph):
        static_output = model(static_input)

    def step(inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if inputs.data_ptr() != static_input.data_ptr():
            static_input.copy_(inputs, non_blocking=True)
        graph.replay()
        return static_output

    return step
