"""What LoadGen costs: the scenarios against the backend's own loop and a plain PyTorch loop.

    python bench/evaluation/loadgen_overhead.py --out OUT [--device cpu|gpu] [--model resnet18]
        [--batch_size 8] [--dtype float32] [--channels_last] [--compile] [--cuda_graphs]
        [--min_duration_s 20] [--min_query_count 100] [--max_qps] [--latency_bound_ms 15]
        [--skip_plain]

Runs, with `dlbs run` (the PyTorch backend, synthetic data) in OUT/logs:
- `benchmark` inference at `--batch_size` and `offline` at the same batch: offline QPS
  against the timed loop's throughput;
- `benchmark` inference at batch 1 and `single_stream`: single-stream p50 against the
  timed loop's batch-1 median (`--cuda_graphs` applies to both, and to the plain loop);
- with `--max_qps`, `max_qps` under `--latency_bound_ms` (batches up to `--batch_size`)
  against the offline QPS;
and, in the same call, bench/evaluation/plain_loop.py with the same settings. Writes
OUT/results.json and OUT/results.md (the table this prints). Exit status 0 whatever the
ratios: the numbers are for people to read (docs/evaluation.md, the issue's targets).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from dlbs.results.protocol import parse_log  # noqa: E402


def dlbs(out: Path, *args: str, timeout: float = 3600) -> None:
    command = [sys.executable, "-m", "dlbs.cli.main", "run", *args]
    print("+", " ".join(command[2:]), flush=True)
    done = subprocess.run(command, cwd=out, timeout=timeout, text=True, capture_output=True)
    sys.stderr.write(done.stderr[-4000:])
    if done.returncode != 0:
        raise SystemExit(f"dlbs run failed (exit status {done.returncode})")


def logs(folder: Path) -> list[dict]:
    return [parse_log(path).values for path in sorted(folder.glob("*.log"))]


def median_record(records: tuple[dict, ...]) -> dict:
    """The record of the repeat whose headline value is the median (the lower one)."""
    key = next(k for k in ("results.qps", "results.latency_p50", "results.throughput",
                           "results.time_median") if k in records[0])
    ordered = sorted(records, key=lambda record: record[key])
    return ordered[(len(ordered) - 1) // 2]


def pick(values: list[dict], scenario: str, batch: int) -> dict:
    for item in values:
        if item.get("exp.scenario") == scenario and item.get("exp.replica_batch") == batch:
            return item
    raise SystemExit(f"no {scenario} experiment at batch {batch} in the logs")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--channels_last", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--cuda_graphs", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's)")
    parser.add_argument("--num_batches", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--min_duration_s", type=float, default=20.0)
    parser.add_argument("--min_query_count", type=int, default=100)
    parser.add_argument("--max_qps", action="store_true")
    parser.add_argument("--max_qps_duration_s", type=float, default=5.0)
    parser.add_argument("--latency_bound_ms", type=float, default=15.0)
    parser.add_argument("--skip_plain", action="store_true")
    parser.add_argument("--repeat", type=int, default=1,
                        help="measure each pair this many times, one pair right after the "
                             "other: the table shows medians and the median of the ratios "
                             "(load that comes and goes on a shared machine cancels out)")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    common = ["-P", "exp.framework=pytorch", "-P", f"exp.model={args.model}",
              "-P", "exp.phase=inference", "-P", f"exp.dtype={args.dtype}",
              "-P", f"exp.num_warmup_batches={args.warmup}",
              "-P", f"exp.num_batches={args.num_batches}",
              "-P", f"pytorch.num_threads={args.threads}",
              "-P", f"pytorch.channels_last={str(args.channels_last).lower()}",
              "-P", f"pytorch.compile={str(args.compile).lower()}",
              "-P", f"exp.min_duration_s={args.min_duration_s}", "-P", "exp.log_dir=logs",
              "-P", f"exp.min_query_count={args.min_query_count}",
              "-P", f"exp.gpus={'0' if args.device == 'gpu' else ''}",
              "-P", f"exp.latency_bound_ms={args.latency_bound_ms}"]
    graphs = ["-P", f"pytorch.cuda_graphs={str(args.cuda_graphs).lower()}"]
    began = time.time()
    pairs: list[tuple[dict, dict, dict, dict]] = []
    for repeat in range(max(1, args.repeat)):
        folder = "logs" if args.repeat <= 1 else f"logs/repeat{repeat + 1}"
        where = ["-P", f"exp.log_dir={folder}"]
        # The throughput pair: CUDA graphs are for batch 1 (as in the issue), not here.
        dlbs(out, *common, *where, "-P", f"exp.replica_batch={args.batch_size}",
             "-V", 'exp.scenario=["benchmark", "offline"]')
        dlbs(out, *common, *where, *graphs, "-P", "exp.replica_batch=1",
             "-V", 'exp.scenario=["benchmark", "single_stream"]')
        values = logs(out / folder)
        pairs.append((pick(values, "benchmark", args.batch_size),
                      pick(values, "offline", args.batch_size),
                      pick(values, "benchmark", 1), pick(values, "single_stream", 1)))
    if args.max_qps:
        dlbs(out, *common, *graphs, "-P", f"exp.replica_batch={args.batch_size}",
             "-P", "exp.scenario=max_qps", "-P", f"exp.min_duration_s={args.max_qps_duration_s}")
    values = logs(out / "logs")
    bench_b, offline, bench_1, single = (median_record(records) for records in zip(*pairs))
    rows = [
        (f"offline QPS / benchmark throughput, batch {args.batch_size}",
         offline["results.qps"], bench_b["results.throughput"], "samples/s",
         [o["results.qps"] / b["results.throughput"] for b, o, _, _ in pairs]),
        ("single-stream p50 / benchmark batch-1 median",
         single["results.latency_p50"], bench_1["results.time_median"], "ms",
         [s["results.latency_p50"] / b["results.time_median"] for _, _, b, s in pairs]),
    ]
    result = {"settings": vars(args), "seconds": time.time() - began,
              "benchmark_batch": {k: bench_b[k] for k in ("results.throughput",
                                                          "results.time_median")},
              "offline": {k: offline[k] for k in ("results.qps", "results.loadgen_valid",
                                                  "results.num_samples")},
              "benchmark_batch1": {k: bench_1[k] for k in ("results.time_median",
                                                           "results.time_p99")},
              "single_stream": {k: single[k] for k in ("results.latency_p50",
                                                       "results.latency_p90",
                                                       "results.latency_p99",
                                                       "results.loadgen_valid")},
              "framework_ver": offline.get("exp.framework_ver")}
    if args.max_qps:
        peak = pick(values, "max_qps", args.batch_size)
        result["max_qps"] = {k: peak.get(k) for k in ("results.max_qps", "results.qps",
                                                      "results.latency_p99",
                                                      "results.latency_bound_met",
                                                      "results.target_qps")}
        rows.append((f"max_qps (p99 < {args.latency_bound_ms:g} ms) / offline QPS",
                     peak["results.max_qps"], offline["results.qps"], "queries/s", []))
    if not args.skip_plain:
        plain_json = out / "plain.json"
        command = [sys.executable, str(HERE / "plain_loop.py"), "--model", args.model,
                   "--device", args.device, "--dtype", args.dtype, "--batch_size",
                   str(args.batch_size), "--num_batches", str(args.num_batches),
                   "--warmup", str(args.warmup), "--threads", str(args.threads),
                   "--out", str(plain_json)]
        command += [flag for flag, on in (("--channels_last", args.channels_last),
                                          ("--compile", args.compile),
                                          ("--cuda_graphs", args.cuda_graphs)) if on]
        print("+", " ".join(command[1:]), flush=True)
        subprocess.run(command, check=True, timeout=3600, capture_output=True,
                       env={**os.environ, "CUDA_VISIBLE_DEVICES":
                            os.environ.get("CUDA_VISIBLE_DEVICES", "0")
                            if args.device == "gpu" else ""})
        plain = json.loads(plain_json.read_text())
        result["plain"] = plain
        rows.append(("offline QPS / plain loop throughput", offline["results.qps"],
                     plain["throughput"], "samples/s", []))
        rows.append(("single-stream p50 / plain loop batch-1 p50",
                     single["results.latency_p50"], plain["batch1_p50_ms"], "ms", []))
    lines = ["| comparison | measured | reference | ratio | unit | each repeat |",
             "|---|---|---|---|---|---|"]
    table = []
    for name, measured, reference, unit, each in rows:
        ratio = statistics.median(each) if each else measured / reference
        lines.append(f"| {name} | {measured:.4g} | {reference:.4g} | {ratio:.3f} | {unit} | "
                     + (", ".join(f"{value:.3f}" for value in each) if len(each) > 1 else "")
                     + " |")
        table.append({"comparison": name, "measured": measured, "reference": reference,
                      "ratio": ratio, "unit": unit, "ratios": each})
    result["table"] = table
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    text = "\n".join(lines)
    (out / "results.md").write_text(text + "\n")
    print(text)
    print(f"({result['seconds']:.0f} s; framework {result['framework_ver']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
