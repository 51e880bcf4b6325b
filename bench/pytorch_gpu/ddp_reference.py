"""A plain DDP training loop (default DDP settings): the multi-GPU yardstick.

Run with ``torchrun --nproc_per_node=N ddp_reference.py [--compile]``. ResNet-50, synthetic
data on each GPU, channels-last, AMP float16 with GradScaler, SGD with momentum, DDP as the
PyTorch tutorial writes it. Rank 0 prints ``__ref.throughput__`` (all replicas).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    """Train for warm-up + timed steps; rank 0 prints the job's throughput."""
    p = argparse.ArgumentParser()
    p.add_argument("--batch_size", type=int, default=256)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--steps", type=int, default=60)
    a = p.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    torch.backends.cudnn.benchmark = True
    fmt = torch.channels_last
    model = torchvision.models.resnet50().cuda().to(memory_format=fmt)
    model = DDP(model, device_ids=[local_rank])
    fwd = torch.compile(model) if a.compile else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    crit = nn.CrossEntropyLoss()
    x = torch.randn(a.batch_size, 3, 224, 224, device="cuda").to(memory_format=fmt)
    y = torch.randint(0, 1000, (a.batch_size,), device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = crit(fwd(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    slowest = torch.tensor([elapsed], device="cuda")
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if dist.get_rank() == 0:
        ms = slowest.item() * 1000.0 / a.steps
        print(f"__ref.time__={json.dumps(ms)}")
        print(f"__ref.throughput__={json.dumps(a.batch_size * world * 1000.0 / ms)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
