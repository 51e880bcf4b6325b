"""A minimal hand-written PyTorch loop: the yardstick the backend's numbers are checked against.

Nothing clever on purpose: torchvision's ResNet-50, synthetic data on the GPU, the textbook
training step (autocast + GradScaler for float16, SGD with momentum) or a forward pass under
inference_mode, one synchronize at the end of the timed loop (throughput), or one per
iteration (``--latency``, batch-1 latency). Prints ``__ref.throughput__`` and ``__ref.time__``.

The knobs of the backend's fast training path, each as PyTorch's documentation writes it:
``--fused`` (torch.optim's fused SGD), ``--graph`` (the whole training step captured in one
CUDA graph, the "whole network capture" example of torch.cuda.graph's documentation;
with ``--compile`` use a mode without inductor's own graphs), ``--inductor NAME=VALUE``
(torch._inductor.config settings).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time

import torch
import torch.nn as nn
import torchvision

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def captured(step, before_capture=lambda: None):
    """Capture ``step`` in a CUDA graph and return the graph's replay.

    Three warm-up calls on a side stream first: the recipe of torch.cuda.graph's documentation.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    before_capture()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def main() -> None:
    """Run one setting and print its figures."""
    p = argparse.ArgumentParser()
    p.add_argument("--phase", choices=["train", "infer"], required=True)
    p.add_argument("--batch_size", type=int, default=256)
    p.add_argument("--dtype", choices=list(DTYPES), default="float32")
    p.add_argument("--channels_last", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--compile_mode", default="default")
    p.add_argument("--cuda_graphs", action="store_true")
    p.add_argument("--autocast_inference", action="store_true", help="AMP instead of a half model")
    p.add_argument("--latency", action="store_true", help="synchronize every iteration")
    p.add_argument("--fused", action="store_true", help="training: fused SGD")
    p.add_argument("--graph", action="store_true", help="training: capture the whole step")
    p.add_argument("--inductor", nargs="*", default=[], help="NAME=VALUE inductor settings")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=100)
    a = p.parse_args()

    torch.backends.cudnn.benchmark = True
    import torch._inductor.config as inductor_config

    for setting in a.inductor:
        name, _, value = setting.partition("=")
        setattr(inductor_config, name, {"true": True, "false": False}.get(value, value))
    torch.set_float32_matmul_precision("high")  # TF32, as the backend's default
    dtype = DTYPES[a.dtype]
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = torchvision.models.resnet50().cuda().to(memory_format=fmt)
    x = torch.randn(a.batch_size, 3, 224, 224, device="cuda").to(memory_format=fmt)
    y = torch.randint(0, 1000, (a.batch_size,), device="cuda")
    amp = (
        torch.autocast("cuda", dtype=dtype, cache_enabled=not a.graph)
        if dtype != torch.float32 else contextlib.nullcontext()
    )

    if a.phase == "train":
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4,
                              fused=a.fused or None)
        scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)
        crit = nn.CrossEntropyLoss()
        fwd = torch.compile(model, mode=a.compile_mode) if a.compile else model

        def step() -> None:
            with amp:
                loss = crit(fwd(x), y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

        if a.graph:
            step = captured(step, before_capture=lambda: opt.zero_grad(set_to_none=True))

    else:
        model.eval()
        if a.autocast_inference:
            ctx = amp
        else:
            model = model.to(dtype)
            x = x.to(dtype)
            ctx = contextlib.nullcontext()
        fwd = torch.compile(model, mode=a.compile_mode) if a.compile else model

        def forward() -> None:
            with torch.inference_mode(), ctx:
                fwd(x)

        step = forward
        if a.cuda_graphs and not a.compile:  # compiled: reduce-overhead does the graphs
            step = captured(forward)

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    if a.latency:
        times = []
        for _ in range(a.steps):
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        elapsed = sum(times)
    else:
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - t0
    ms = elapsed * 1000.0 / a.steps
    print(f"__ref.time__={json.dumps(ms)}")
    print(f"__ref.throughput__={json.dumps(a.batch_size * 1000.0 / ms)}")
    print(f"__ref.mem_peak__={json.dumps(torch.cuda.max_memory_reserved() / 2**20)}")


if __name__ == "__main__":
    main()
