"""What a trace costs: traced against untraced step times, level by level (docs/tracing.md).

For each framework and level, one `dlbs run` of the same experiment (its own log folder:
`exp.trace_level` is not part of the id, so the runs would otherwise be one experiment):
- `untraced`: the median timed step of the run with `exp.trace_level none`;
- `timed`: the median timed step of the traced run, which must match `untraced` (tracing
  happens after the timed loop and never touches it);
- `traced`: the median step of the traced pass, read from the trace (`dlbs trace --view
  duration`); `overhead` = traced / timed - 1, of the medians and of the fastest steps
  (on a loaded machine the fastest step is the steadier figure);
- the trace's size and its number of events.
With --plain, a plain PyTorch loop (plain_loop.py) in the same call gives the step time the
untraced numbers are checked against. Writes OUT/results.md and OUT/results.json.

    python bench/tracing/overhead.py --device cpu --model resnet50 --batch 4 --out /tmp/trace-bench
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from dlbs.results.store import open_store  # noqa: E402
from dlbs.traces.reader import TraceFile  # noqa: E402
from dlbs.traces.views import view  # noqa: E402


def dlbs_run(out: Path, framework: str, level: str, args: argparse.Namespace) -> dict:
    """One experiment with `exp.trace_level level`; its stored results."""
    folder = out / "logs" / framework / level
    params = {"exp.framework": framework, "exp.model": args.model,
              "exp.replica_batch": args.batch, "exp.dtype": args.dtype,
              "exp.num_batches": args.num_batches, "exp.num_warmup_batches": args.warmup,
              "exp.trace_level": level, "exp.trace_batches": args.trace_batches,
              "exp.log_dir": str(folder), "exp.gpus": "0" if args.device == "gpu" else "",
              "exp.rerun": "always"}
    if framework == "mxnet":
        # Block spans need an imperative network; every level runs the same one.
        params["mxnet.hybridize"] = False
        if args.threads:
            params["mxnet.num_threads"] = args.threads
    elif args.threads:
        params["pytorch.num_threads"] = args.threads
    argv = [sys.executable, "-m", "dlbs.cli.main", "run", "--progress", "lines"]
    for name, value in params.items():
        argv += ["-P", f"{name}={json.dumps(value) if not isinstance(value, str) else value}"]
    for extra in args.param:
        argv += ["-P", extra]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "", flush=True)
    if done.returncode != 0:
        raise SystemExit(f"dlbs run failed ({framework}, {level}):\n{done.stderr[-3000:]}")
    with open_store(folder / "results.db", create=False) as store:
        attempt = store.attempts()[-1]
    return attempt.results


def traced_steps(path: str) -> tuple[list[float], int]:
    """The traced pass's step times (ms) and the trace's number of complete events."""
    trace = TraceFile(path)
    steps = [row["step_ms"] for row in view("duration", trace).rows]
    count = sum(1 for _ in trace.spans())
    return steps, count


def plain_loop(args: argparse.Namespace) -> float:
    argv = [sys.executable, str(REPO / "bench" / "tracing" / "plain_loop.py"), "--device",
            args.device, "--model", args.model, "--batch_size", str(args.batch), "--dtype",
            args.dtype, "--warmup", str(args.warmup), "--steps", str(args.num_batches),
            "--threads", str(args.threads)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["median_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="pytorch,mxnet")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--levels", default="step,layer,operator,full")
    parser.add_argument("--num_batches", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--trace_batches", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=1, help="runs per level, pooled")
    parser.add_argument("--plain", action="store_true", help="also time plain_loop.py")
    parser.add_argument("-P", dest="param", action="append", default=[],
                        help="another parameter for every run (NAME=VALUE)")
    parser.add_argument("--out", type=Path, default=Path("trace-bench"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for framework in args.frameworks.split(","):
        untraced = dlbs_run(args.out, framework, "none", args)["results.time_median"]
        for level in args.levels.split(","):
            # Each round is a run of its own; the rounds' steps are pooled, and the fastest
            # timed and traced steps of all of them compared (the steadiest figure on a
            # machine that others load).
            timed_steps: list[float] = []
            traced_all: list[float] = []
            for _ in range(args.rounds):
                results = dlbs_run(args.out, framework, level, args)
                steps, events = traced_steps(results["results.trace_file"])
                timed_steps += results["results.time_data"]
                traced_all += steps
            timed = statistics.median(timed_steps)
            traced = statistics.median(traced_all)
            fastest_timed, fastest_traced = min(timed_steps), min(traced_all)
            rows.append({"framework": framework, "level": level, "untraced_ms": untraced,
                         "timed_ms": timed, "traced_ms": traced,
                         "overhead": traced / timed - 1.0,
                         "fastest_timed_ms": fastest_timed, "fastest_traced_ms": fastest_traced,
                         "overhead_fastest": fastest_traced / fastest_timed - 1.0,
                         "trace_mib": os.path.getsize(results["results.trace_file"]) / 2**20,
                         "events": events, "trace_file": results["results.trace_file"]})
            print(json.dumps(rows[-1]), flush=True)
    plain = plain_loop(args) if args.plain else None
    lines = [f"# Trace overhead: {args.model}, batch {args.batch}, {args.dtype}, {args.device}, "
             f"{args.num_batches} timed and {args.trace_batches} traced batches per run, "
             f"{args.rounds} run(s) per level", "",
             "| framework | level | untraced run, median ms | traced run's timed loop, "
             "median ms | traced pass, median step ms | overhead (medians) | fastest timed / "
             "traced step ms | overhead (fastest) | trace MiB | events |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['framework']} | {row['level']} | {row['untraced_ms']:.1f} | "
                     f"{row['timed_ms']:.1f} | {row['traced_ms']:.1f} | "
                     f"{row['overhead'] * 100:+.1f}% | {row['fastest_timed_ms']:.1f} / "
                     f"{row['fastest_traced_ms']:.1f} | {row['overhead_fastest'] * 100:+.1f}% | "
                     f"{row['trace_mib']:.2f} | {row['events']} |")
    if plain is not None:
        lines += ["", f"Plain PyTorch loop (plain_loop.py), same call: median step "
                      f"{plain:.1f} ms."]
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    (args.out / "results.json").write_text(json.dumps({"rows": rows, "plain_ms": plain},
                                                      indent=2))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
