"""The reference figures a backend's scenarios are held against: a plain PyTorch loop.

    python bench/evaluation/plain_loop.py --model resnet50 --device gpu --dtype float16 \
        --channels_last --compile --batch_size 256 --cuda_graphs --out plain.json

No dlbs, no LoadGen: torchvision's model in eval mode, one random batch made once on the
device, and
- throughput: `--num_batches` batches of `--batch_size` back to back after `--warmup`,
  synchronized once at the end; images per second;
- batch-1 latency: `--latency_batches` single-image forward passes, each synchronized and
  timed on its own (with `--cuda_graphs`, replays of a captured CUDA graph, the input
  copied in first); p50, p90, p99 in ms.
Prints one JSON object (and writes it to `--out`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torchvision

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def build(args: argparse.Namespace, device: torch.device) -> torch.nn.Module:
    model = getattr(torchvision.models, args.model)().eval().to(device=device,
                                                                 dtype=DTYPES[args.dtype])
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    if args.compile:
        model = torch.compile(model, dynamic=False)
    return model


def example(args: argparse.Namespace, batch: int, device: torch.device) -> torch.Tensor:
    data = torch.randn((batch, 3, args.size, args.size), device=device,
                       dtype=DTYPES[args.dtype])
    if args.channels_last:
        data = data.contiguous(memory_format=torch.channels_last)
    return data


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def throughput(model, args, device) -> float:
    data = example(args, args.batch_size, device)
    with torch.inference_mode():
        for _ in range(args.warmup):
            model(data)
        sync(device)
        start = time.perf_counter()
        for _ in range(args.num_batches):
            model(data)
        sync(device)
    return args.batch_size * args.num_batches / (time.perf_counter() - start)


def batch1_latencies(model, args, device) -> list[float]:
    data = example(args, 1, device)
    step = lambda: model(data)  # noqa: E731
    with torch.inference_mode():
        for _ in range(args.warmup):
            step()
        sync(device)
        if args.cuda_graphs:
            static = data.clone(memory_format=torch.channels_last if args.channels_last
                                else torch.contiguous_format)
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                for _ in range(3):
                    model(static)
            torch.cuda.current_stream(device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                model(static)

            def step() -> None:
                static.copy_(data)
                graph.replay()

            for _ in range(args.warmup):
                step()
            sync(device)
        times = []
        for _ in range(args.latency_batches):
            start = time.perf_counter()
            step()
            sync(device)
            times.append((time.perf_counter() - start) * 1000.0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="gpu")
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    parser.add_argument("--channels_last", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--cuda_graphs", action="store_true")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--num_batches", type=int, default=100)
    parser.add_argument("--latency_batches", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda", 0) if args.device == "gpu" else torch.device("cpu")
    torch.backends.cudnn.benchmark = True
    model = build(args, device)
    rate = throughput(model, args, device)
    latencies = batch1_latencies(model, args, device)
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive")
    result = {"model": args.model, "device": args.device, "dtype": args.dtype,
              "channels_last": args.channels_last, "compile": args.compile,
              "cuda_graphs": args.cuda_graphs, "batch_size": args.batch_size,
              "throughput": rate, "batch1_p50_ms": statistics.median(latencies),
              "batch1_p90_ms": quantiles[89], "batch1_p99_ms": quantiles[98],
              "torch": torch.__version__,
              "gpu": torch.cuda.get_device_name(0) if args.device == "gpu" else ""}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
