"""How fast `dlbs plan` expands big sweeps, as a whole process (start-up included).

A pytorch sweep over the full default configs, in containers (`exp.docker: true`),
written as jsonl: 1,000 / 10,000 / 100,000 experiments (`axes`). Reports the
best wall time of `--repeat` runs, the CPU time (user + system) of that run, the time per
experiment and the peak resident memory of the process, so that linear time and flat memory
can be read off the table; on a loaded machine the CPU time is the steadier figure.

The 1,000 row is also given against DLBS's planner on the same sweep: 8.4 s, the time last
recorded on this kind of machine (DLBS is not on PyPI, so it is not re-run here).

The checkout's modules are byte-compiled first, as an installed package's are: with
PYTHONDONTWRITEBYTECODE set, every run would otherwise compile dlbs's sources again.

    python bench/plan_speed.py [--repeat 3] [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "vgg11", "vgg16",
          "alexnet_owt", "googlenet", "inception3"]
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
GPUS = ["", "0", "0,1", "0,1,2,3", "0,1,2,3,4,5,6,7"]
DLBS_SECONDS = {1000: 8.4}  # DLBS's planner, last recorded (see the module doc)


def axes(size: int) -> list[str]:
    """10 models x 10 batches x 5 GPU lists x 2 dtypes (1,000), then x 2 phases x warm-ups.

    10,000 is the sweep of issue 22: ... x 2 phases x 5 warm-up lengths.
    """
    if size != 1000 and (size % 2000 or size < 2000):
        raise SystemExit(f"size must be 1000 or a multiple of 2000, not {size}")
    swept = [f"exp.model={json.dumps(MODELS)}", f"exp.replica_batch={json.dumps(BATCHES)}",
             f"exp.gpus={json.dumps(GPUS)}", 'exp.dtype=["float32", "float16"]']
    if size > 1000:
        swept += ['exp.phase=["training", "inference"]',
                  f"exp.num_warmup_batches={json.dumps(list(range(size // 2000)))}"]
    return swept


def run_once(size: int) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of one `dlbs plan` of `size`."""
    command = [sys.executable, "-m", "dlbs.cli.main", "plan", "--format", "jsonl",
               "-P", "exp.docker=true"]
    for axis in axes(size):
        command += ["-V", axis]
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, cwd=REPO)
    lines = 0
    for _ in child.stdout:
        lines += 1
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if status != 0 or lines != size:
        raise SystemExit(f"plan of {size} failed: status {status}, {lines} lines")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    for folder in ("dlbs", "launchers"):
        compileall.compile_dir(REPO / folder, quiet=1)
    print(f"{'experiments':>12} {'best wall s':>12} {'its CPU s':>10} {'us/exp':>8} "
          f"{'peak RSS MiB':>13} {'DLBS s':>7} {'x DLBS':>7}")
    for size in (int(s) for s in args.sizes.split(",")):
        runs = [run_once(size) for _ in range(args.repeat)]
        wall, cpu, _ = min(runs)
        rss = max(r[2] for r in runs)
        dlbs = DLBS_SECONDS.get(size)
        versus = f"{dlbs:>7.1f} {dlbs / wall:>7.1f}" if dlbs else f"{'':>7} {'':>7}"
        print(f"{size:>12,} {wall:>12.3f} {cpu:>10.3f} {wall / size * 1e6:>8.1f} "
              f"{rss:>13.1f} {versus}")


if __name__ == "__main__":
    main()
