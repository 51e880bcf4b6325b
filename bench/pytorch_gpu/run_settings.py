"""Run ResNet-50 settings through the backend and the reference loop, side by side, on one GPU.

Usage (from the repository root, on a GPU machine)::

    python bench/pytorch_gpu/run_settings.py --group train --out results_dir

Each setting runs the backend (``python/pytorch_benchmarks/benchmarks.py``) and then
``reference_loop.py`` with the same model, batch, precision, layout and compilation, each in
its own process. Every process's output is appended to ``<out>/<group>.log``; the figures go
to ``<out>/<group>.json`` and a Markdown table is printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BACKEND = ROOT / "python" / "pytorch_benchmarks" / "benchmarks.py"
REFERENCE = Path(__file__).resolve().parent / "reference_loop.py"
KEY = re.compile(r"__([A-Za-z0-9_.]+)__=(.*)$")


@dataclass(frozen=True)
class Setting:
    """One row of the table."""

    name: str
    group: str  # train | infer | latency
    batch: int
    dtype: str
    channels_last: bool = False
    compile: bool = False
    compile_mode: str = "default"
    cuda_graphs: bool = False

    def backend_argv(self, warmup: int, steps: int) -> list[str]:
        """The backend's command line for this setting."""
        argv = [
            sys.executable,
            str(BACKEND),
            "--model",
            "resnet50",
            "--device",
            "gpu",
            "--batch_size",
            str(self.batch),
            "--dtype",
            self.dtype,
            "--forward_only",
            str(self.group != "train").lower(),
            "--num_warmup_batches",
            str(warmup),
            "--num_batches",
            str(steps),
            "--channels_last",
            str(self.channels_last).lower(),
            "--compile",
            str(self.compile).lower(),
            "--compile_mode",
            self.compile_mode,
            "--cuda_graphs",
            str(self.cuda_graphs).lower(),
        ]
        return argv

    def reference_argv(self, warmup: int, steps: int) -> list[str]:
        """The reference loop's command line for this setting."""
        argv = [
            sys.executable,
            str(REFERENCE),
            "--phase",
            "train" if self.group == "train" else "infer",
            "--batch_size",
            str(self.batch),
            "--dtype",
            self.dtype,
            "--warmup",
            str(warmup),
            "--steps",
            str(steps),
            "--compile_mode",
            self.compile_mode,
        ]
        argv += ["--channels_last"] if self.channels_last else []
        argv += ["--compile"] if self.compile else []
        argv += ["--cuda_graphs"] if self.cuda_graphs else []
        argv += ["--latency"] if self.group == "latency" else []
        return argv


SETTINGS = [
    Setting("train fp32 NCHW eager", "train", 256, "float32"),
    Setting("train fp16 CL eager", "train", 256, "float16", channels_last=True),
    Setting("train bf16 CL eager", "train", 256, "bfloat16", channels_last=True),
    Setting("train fp16 CL compiled", "train", 256, "float16", True, compile=True),
    Setting("train bf16 CL compiled", "train", 256, "bfloat16", True, compile=True),
    Setting("infer fp32 NCHW eager", "infer", 512, "float32"),
    Setting("infer fp16 CL eager", "infer", 512, "float16", channels_last=True),
    Setting("infer bf16 CL eager", "infer", 512, "bfloat16", channels_last=True),
    Setting("infer fp16 CL compiled", "infer", 512, "float16", True, compile=True),
    Setting("infer bf16 CL compiled", "infer", 512, "bfloat16", True, compile=True),
    Setting("latency bs1 fp16 CL eager", "latency", 1, "float16", True),
    Setting("latency bs1 fp16 CL CUDA graphs", "latency", 1, "float16", True, cuda_graphs=True),
    Setting(
        "latency bs1 fp16 CL compiled+graphs",
        "latency",
        1,
        "float16",
        True,
        compile=True,
        compile_mode="reduce-overhead",
        cuda_graphs=True,
    ),
]
# Iterations: (warm-up, timed). Compiled runs compile during warm-up.
ITERATIONS = {"train": (15, 60), "infer": (15, 100), "latency": (50, 500)}


def run(argv: list[str], log, timeout: float) -> dict[str, object]:
    """Run one process, append its output to the log, return its ``__key__`` values."""
    log.write(f"\n===== {' '.join(argv)}\n")
    log.flush()
    started = time.time()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        output = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        # What the process printed before it was stopped still counts (the exception holds
        # bytes even in text mode).
        output = "".join(part.decode(errors="replace") if isinstance(part, bytes) else part or ""
                         for part in (exc.stdout, exc.stderr))
        output += f"\nTIMEOUT after {timeout:.0f}s"
    log.write(output)
    log.write(f"\n===== wall {time.time() - started:.1f}s\n")
    log.flush()
    values: dict[str, object] = {}
    for line in output.splitlines():
        match = KEY.search(line)
        if match:
            try:
                values[match.group(1)] = json.loads(match.group(2))
            except json.JSONDecodeError:
                pass
    return values


def keep(rows: list[dict], row: dict, path: Path) -> None:
    """Add a row: print it as a JSON line and rewrite the JSON file with every row so far."""
    rows.append(row)
    print(json.dumps(row), flush=True)
    path.write_text(json.dumps(rows, indent=1))


def main() -> None:
    """Run the chosen groups and print the table."""
    p = argparse.ArgumentParser()
    p.add_argument("--group", default="all", help="train, infer, latency, or a comma list, or all")
    p.add_argument("--only", default="", help="run only settings whose name contains this")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--deadline_s", type=float, default=560.0, help="start nothing new after this")
    a = p.parse_args()
    groups = {"train", "infer", "latency"} if a.group == "all" else set(a.group.split(","))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = a.group.replace(",", "_")
    started = time.time()
    rows = []
    with open(out / f"{tag}.log", "a") as log:
        for s in SETTINGS:
            if s.group not in groups or a.only not in s.name:
                continue
            left = a.deadline_s - (time.time() - started)
            if left < 30:
                rows.append({"setting": s.name, "skipped": "deadline"})
                continue
            warmup, steps = ITERATIONS[s.group]
            backend = run(s.backend_argv(warmup, steps), log, left)
            left = a.deadline_s - (time.time() - started)
            reference = run(s.reference_argv(warmup, steps), log, max(left, 30))
            row = {
                "setting": s.name,
                "backend_img_s": backend.get("results.throughput"),
                "backend_ms": backend.get("results.time"),
                "backend_median_ms": backend.get("results.time_median"),
                "backend_status": backend.get("results.status"),
                "backend_msg": backend.get("results.status_msg"),
                "reference_img_s": reference.get("ref.throughput"),
                "reference_ms": reference.get("ref.time"),
            }
            b, r = row["backend_img_s"], row["reference_img_s"]
            row["ratio"] = (b / r) if isinstance(b, float) and isinstance(r, float) else None
            keep(rows, row, out / f"{tag}.json")
    print("\n| setting | backend img/s | reference img/s | backend/reference | backend ms |")
    print("|---|---|---|---|---|")
    for row in rows:
        if "skipped" in row:
            print(f"| {row['setting']} | skipped ({row['skipped']}) | | | |")
            continue
        fmt = lambda v, spec: format(v, spec) if isinstance(v, float) else str(v)  # noqa: E731
        print(
            f"| {row['setting']} | {fmt(row['backend_img_s'], ',.0f')} | "
            f"{fmt(row['reference_img_s'], ',.0f')} | {fmt(row['ratio'], '.3f')} | "
            f"{fmt(row['backend_ms'], '.3f')} |"
        )


if __name__ == "__main__":
    main()
