"""Energy, power and MFU of ResNet-50 on one GPU through `dlbs run`, monitor on and off.

Usage (repository root, on a GPU machine, dlbs importable)::

    python bench/efficiency/run_efficiency.py --out OUT [--deadline_s 230]

Rows, most important first, each one `dlbs run` of one experiment into `OUT/results.db`
(the monitor at `--frequency`, reading NVML), until `--deadline_s` (a row starts only when
its estimate fits): training and inference in eager mode with the monitor on and then off
(the same experiment again, `exp.rerun=always`: the monitor's cost), PyTorch's plain loop
(bench/pytorch_gpu/reference_loop.py) beside them, then compiled inference and training.
Everything printed goes to `OUT/run.log`, the plain loop's figures to `OUT/reference.json`,
the GPU's power settings to `OUT/env.txt`; `analyze.py` turns `OUT/results.db` into the
tables. A CPU rehearsal: `--gpus '' --model sensor_net --batch 8` (no energy there).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "bench" / "pytorch_gpu" / "reference_loop.py"
KEY = re.compile(r"__([A-Za-z0-9_.]+)__=(.*)$")


def rows(args: argparse.Namespace) -> list[tuple[str, float, list[str]]]:
    """(name, estimated seconds, command) of each row, in order."""
    def dlbs(phase: str, batches: int, *extra: str) -> list[str]:
        return [sys.executable, "-m", "dlbs.cli.main", "run", "--progress", "lines",
                "-P", "exp.framework=pytorch", "-P", f"exp.model={args.model}",
                "-P", f"exp.gpus={args.gpus}", "-P", f"exp.replica_batch={args.batch}",
                "-P", f"exp.dtype={args.dtype}", "-P", f"exp.phase={phase}",
                "-P", f"exp.num_batches={batches}",
                "-P", f"exp.num_warmup_batches={args.warmup}",
                "-P", f"exp.log_dir={args.out / 'logs'}",
                "-P", f"runtime.results_db={args.out / 'results.db'}",
                "-P", "exp.rerun=always", *extra]

    on = ("-P", f"monitor.frequency={args.frequency}")
    off = ("-P", "monitor.frequency=0")
    compiled = ("-P", "pytorch.compile=true")
    train, infer = args.train_batches, args.infer_batches
    reference = [sys.executable, str(REFERENCE), "--phase", "train", "--batch_size",
                 str(args.batch), "--dtype", args.dtype, "--channels_last", "--warmup",
                 str(args.warmup), "--steps", str(train)]
    return [
        ("training, eager, monitor on", 25, dlbs("training", train, *on)),
        ("training, eager, monitor off", 25, dlbs("training", train, *off)),
        ("inference, eager, monitor on", 25, dlbs("inference", infer, *on)),
        ("inference, eager, monitor off", 25, dlbs("inference", infer, *off)),
        ("reference: plain loop, training, eager", 20, reference),
        ("inference, compiled, monitor on", 55, dlbs("inference", infer, *on, *compiled)),
        ("training, compiled, monitor on", 70, dlbs("training", train, *on, *compiled)),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gpus", default="0")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--train_batches", type=int, default=160)
    parser.add_argument("--infer_batches", type=int, default=400)
    parser.add_argument("--frequency", type=float, default=0.1)
    parser.add_argument("--deadline_s", type=float, default=230.0)
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    log_path = args.out / "run.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    environment = subprocess.run(
        ["sh", "-c", "nvidia-smi --query-gpu=index,name,driver_version,power.limit,"
                     "enforced.power.limit,clocks.max.sm,clocks.max.mem --format=csv; "
                     "nvidia-smi -q -d POWER | head -40; python3 -c 'import torch, pynvml; "
                     "print(torch.__version__, pynvml.__file__)'"],
        capture_output=True, text=True, check=False)
    (args.out / "env.txt").write_text(environment.stdout + environment.stderr)
    reference: dict[str, float] = {}
    with open(log_path, "a") as log:
        for name, estimate, command in rows(args):
            left = args.deadline_s - (time.monotonic() - began)
            if left < estimate:
                print(f"skipped {name}: {left:.0f} s left, it takes about {estimate} s",
                      file=log, flush=True)
                continue
            print(f"=== {name}: {' '.join(command)}", file=log, flush=True)
            started = time.monotonic()
            try:
                done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True,
                                      timeout=max(left, 1.0), check=False)
            except subprocess.TimeoutExpired as expired:
                output = expired.stdout or ""
                log.write(output if isinstance(output, str) else output.decode(errors="replace"))
                print(f"=== {name}: stopped by the deadline", file=log, flush=True)
                break
            log.write(done.stdout)
            print(f"=== {name}: exit {done.returncode}, {time.monotonic() - started:.1f} s",
                  file=log, flush=True)
            if name.startswith("reference"):
                for line in done.stdout.splitlines():
                    match = KEY.search(line)
                    if match:
                        reference[match.group(1)] = json.loads(match.group(2))
    (args.out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    print(f"done in {time.monotonic() - began:.1f} s; {log_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
