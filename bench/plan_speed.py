"""How fast `dlbs plan` expands big sweeps, as a whole process (start-up included).

A pytorch sweep over the full default configs with six axes, written as jsonl:
1,000 / 10,000 / 100,000 experiments. Reports the best wall time of `--repeat` runs, the
time per experiment and the peak resident memory of the process, so that linear time and
flat memory can be read off the table.

    python bench/plan_speed.py [--repeat 3] [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

MODELS = ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "vgg11", "vgg16",
          "alexnet_owt", "googlenet", "inception3"]
BATCHES = [16, 32, 64, 128, 256]
GPUS = ["", "0", "0,1", "0,1,2,3", "0,1,2,3,4,5,6,7"]


def axes(size: int) -> list[str]:
    """Six axes: 1,000 combinations of five, times size / 1,000 warm-up lengths."""
    if size % 1000 or size < 1000:
        raise SystemExit(f"size must be a multiple of 1000, not {size}")
    return [f"exp.model={json.dumps(MODELS)}", f"exp.replica_batch={json.dumps(BATCHES)}",
            f"exp.gpus={json.dumps(GPUS)}", 'exp.dtype=["float32", "float16"]',
            'exp.phase=["training", "inference"]',
            f"exp.num_warmup_batches={json.dumps(list(range(size // 1000)))}"]


def run_once(size: int) -> tuple[float, float, int]:
    command = [sys.executable, "-m", "dlbs.cli.main", "plan", "--format", "jsonl"]
    for axis in axes(size):
        command += ["-V", axis]
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE)
    lines = 0
    for _ in child.stdout:
        lines += 1
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if status != 0 or lines != size:
        raise SystemExit(f"plan of {size} failed: status {status}, {lines} lines")
    return wall, usage.ru_maxrss / 1024, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    print(f"{'experiments':>12} {'best wall s':>12} {'us/exp':>8} {'peak RSS MiB':>13}")
    for size in (int(s) for s in args.sizes.split(",")):
        runs = [run_once(size) for _ in range(args.repeat)]
        wall = min(r[0] for r in runs)
        rss = max(r[1] for r in runs)
        print(f"{size:>12,} {wall:>12.3f} {wall / size * 1e6:>8.1f} {rss:>13.1f}")


if __name__ == "__main__":
    main()
