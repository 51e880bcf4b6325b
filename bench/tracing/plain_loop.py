"""A plain PyTorch training loop: the step time the backend's untraced numbers must match.

torchvision's model, synthetic data on the device, the textbook step (autocast for half
types, SGD with momentum), a synchronize after every step, as the backend times its steps.
Prints one JSON object: the per-step times (ms) and their median.

    python bench/tracing/plain_loop.py --device cpu --model resnet50 --batch_size 4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time

import torch
import torch.nn as nn
import torchvision

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def main() -> None:
    """Time `--steps` training steps after `--warmup` and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--dtype", choices=list(DTYPES), default="float32")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.device == "gpu" else "cpu")
    torch.backends.cudnn.benchmark = True
    torch.set_float32_matmul_precision("high")  # the backend's default (TF32 on a GPU)
    dtype = DTYPES[args.dtype]
    model = getattr(torchvision.models, args.model)(weights=None).to(device).train()
    inputs = torch.randn(args.batch_size, 3, 224, 224, device=device)
    labels = torch.randint(0, 1000, (args.batch_size,), device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def step() -> None:
        with (torch.autocast(device.type, dtype=dtype) if dtype != torch.float32
              else contextlib.nullcontext()):
            loss = criterion(model(inputs), labels)
        optimizer.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

    for _ in range(args.warmup):
        step()
    sync()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - start) * 1000.0)
    print(json.dumps({"times_ms": times, "median_ms": statistics.median(times),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
