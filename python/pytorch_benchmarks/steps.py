"""What one step does: a training step (forward, loss, backward, SGD) or an inference pass."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
import torch.nn as nn

Step = Callable[[torch.Tensor, torch.Tensor], object]
#: The loss of one batch: (model, inputs, labels) -> a scalar tensor.
LossOf = Callable[[nn.Module, torch.Tensor, object], torch.Tensor]
#: A span of one part of a step, by name (the traced pass's; `no_phase` outside it).
Phase = Callable[[str], contextlib.AbstractContextManager]
_NO_SPAN = contextlib.nullcontext()


def no_phase(name: str) -> contextlib.AbstractContextManager:
    """No span: what the timed steps use."""
    return _NO_SPAN


def autocast_context(
    device: torch.device, dtype: torch.dtype, cache: bool = True
) -> contextlib.AbstractContextManager:
    """Mixed precision for training: autocast to float16/bfloat16, nothing for float32.

    ``cache`` False for a step captured in a CUDA graph (torch's rule for autocast there).
    """
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype, cache_enabled=cache)


def make_training_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    dtype: torch.dtype,
    phase: Phase = no_phase,
    autocast_cache: bool = True,
    loss_of: LossOf | None = None,
) -> Step:
    """Forward and loss (under autocast for half types), backward, optimizer step.

    ``phase`` spans each of the three (the traced pass, docs/tracing.md). float16 scales
    the loss with a GradScaler; with a fused optimizer its overflow check stays on the device.
    ``loss_of`` computes the loss (default: cross-entropy of the model's output against
    class labels; a transformer's module returns its own loss).
    """
    criterion = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None
    if loss_of is None:
        def loss_of(module: nn.Module, inputs: torch.Tensor, labels: object) -> torch.Tensor:
            return criterion(module(inputs), labels)

    def step(inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with phase("forward"), autocast_context(device, dtype, autocast_cache):
            loss = loss_of(model, inputs, labels)
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


def make_graphed_training_step(
    step: Step, inputs: torch.Tensor, labels: torch.Tensor, warmup: int = 3
) -> Step:
    """Capture a whole training step in one CUDA graph and return a step that replays it.

    The graph holds forward, loss, backward, the optimizer and the loss scaling. Each call
    copies its batch into ``inputs``/``labels`` (the static input buffers; no copy when it
    is them) and replays the graph.

    ``warmup`` eager steps run first on a side stream (cuDNN's autotuning, torch.compile's
    compilation, the optimizer's state and the scaler's lazily made tensors happen there);
    gradients are dropped before the capture so that backward allocates them from the graph's
    own memory pool and every replay writes them in place. Work of other threads (a data
    loader) may go on meanwhile: the capture refuses unsafe calls of this thread only.
    """
    device = inputs.device
    current = torch.cuda.current_stream(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(current)
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step(inputs, labels)
    current.wait_stream(side)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        static_loss = step(inputs, labels)

    def replay(batch: torch.Tensor, batch_labels: torch.Tensor) -> torch.Tensor:
        if batch.data_ptr() != inputs.data_ptr():
            inputs.copy_(batch, non_blocking=True)
        if batch_labels.data_ptr() != labels.data_ptr():
            labels.copy_(batch_labels, non_blocking=True)
        graph.replay()
        return static_loss

    return replay


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
    with torch.inference_mode(), torch.cuda.graph(graph, capture_error_mode="thread_local"):
        static_output = model(static_input)

    def step(inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if inputs.data_ptr() != static_input.data_ptr():
            static_input.copy_(inputs, non_blocking=True)
        graph.replay()
        return static_output

    return step
