#!/usr/bin/env python3
"""ResNet-50 inference on this CPU: MXNet graph settings beside the PyTorch backend.

Runs both backends exactly as dlbs does (subprocesses of their `benchmarks.py`, synthetic
data, float32, the same thread count) at batch 1 and 32, and prints a Markdown table of the
median batch time and throughput. Configurations are interleaved round by round, so drift in
the machine's load (other jobs) spreads over all of them instead of favouring one.

    .venv/bin/python bench/mxnet_cpu/resnet50_inference.py --rounds 2 --out results.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MXNET = REPO / "python" / "mxnet_benchmarks" / "benchmarks.py"
PYTORCH = REPO / "python" / "pytorch_benchmarks" / "benchmarks.py"

# name -> (backend script, extra flags)
CONFIGS = {
    "MXNet imperative (no hybridize)": (MXNET, ["--hybridize", "false"]),
    "MXNet hybridized": (MXNET, ["--hybridize", "true", "--static_graph", "false"]),
    "MXNet static graph": (MXNET, ["--static_graph", "true", "--graph_backend", "none"]),
    "MXNet static graph + oneDNN fusion": (MXNET, ["--static_graph", "true",
                                                   "--graph_backend", "onednn"]),
    "PyTorch backend (eager)": (PYTORCH, []),
}


def run_once(script: Path, extra: list[str], batch: int, batches: int, warmup: int,
             threads: int) -> dict:
    """One backend run; returns its protocol values (raises when it failed)."""
    argv = [sys.executable, str(script), "--model", "resnet50", "--device", "cpu",
            "--forward_only", "true", "--dtype", "float32", "--batch_size", str(batch),
            "--num_batches", str(batches), "--num_warmup_batches", str(warmup),
            "--num_threads", str(threads), *extra]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
    values = {}
    for line in done.stdout.splitlines():
        if line.startswith("__") and "__=" in line:
            key, _, raw = line[2:].partition("__=")
            values[key] = json.loads(raw)
    if done.returncode != 0 or values.get("results.status") != "ok":
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout[-2000:]}\n"
                           f"{done.stderr[-2000:]}")
    return values


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (best effort)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> int:
    """Run every configuration at every batch size, `--rounds` times, and report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--batch_sizes", default="1,32")
    parser.add_argument("--out", default="", help="also write the raw results here (JSON)")
    args = parser.parse_args()
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    # Enough timed batches for a stable median at each size, in minutes on a small CPU.
    plan = {1: (20, 5), 32: (5, 2)}
    samples: dict[tuple[str, int], list[float]] = {}
    round_medians: dict[tuple[str, int], list[float]] = {}
    versions: dict[str, str] = {}
    for round_index in range(args.rounds):
        for batch in batch_sizes:
            batches, warmup = plan.get(batch, (6, 2))
            for name, (script, extra) in CONFIGS.items():
                values = run_once(script, extra, batch, batches, warmup, args.threads)
                samples.setdefault((name, batch), []).extend(values["results.time_data"])
                round_medians.setdefault((name, batch), []).append(
                    values["results.time_median"])
                versions[script.parent.name] = values["exp.framework_ver"]
                print(f"round {round_index + 1} batch {batch:>2} {name}: "
                      f"median {values['results.time_median']:.1f} ms", file=sys.stderr)
    rows = []
    for (name, batch), times in samples.items():
        median = statistics.median(times)
        rows.append({"config": name, "batch": batch, "samples": len(times),
                     "median_ms": median, "best_ms": min(times),
                     "p90_ms": sorted(times)[int(0.9 * (len(times) - 1))],
                     "throughput": batch * 1000.0 / median,
                     "round_medians_ms": round_medians[(name, batch)]})
    rows.sort(key=lambda row: (row["batch"], list(CONFIGS).index(row["config"])))
    machine = f"{cpu_model()}, {os.cpu_count()} cores, {args.threads} threads"
    print(f"ResNet-50 inference, float32, synthetic data; {machine}; {versions}")
    # The best batch is printed too: on a shared machine it is the least disturbed figure.
    # Each round's median shows how much the machine's load moved between rounds.
    print("| batch | configuration | median ms/batch | best ms | p90 ms | images/s (median) "
          "| medians per round | samples |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        per_round = " / ".join(f"{value:.0f}" for value in row["round_medians_ms"])
        print(f"| {row['batch']} | {row['config']} | {row['median_ms']:.1f} | "
              f"{row['best_ms']:.1f} | {row['p90_ms']:.1f} | {row['throughput']:.1f} | "
              f"{per_round} | {row['samples']} |")
    if args.out:
        out = Path(args.out)
        document = {"machine": machine, "versions": versions, "rows": rows,
                    "samples": {f"{name} @ {batch}": times
                                for (name, batch), times in samples.items()}}
        fd, tmp = tempfile.mkstemp(dir=out.parent or ".", prefix=out.name, suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            json.dump(document, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
