"""The GPU targets of docs/evaluation.md ("Getting the GPU's real numbers"), measured with dlbs.

    python bench/evaluation/gpu_targets.py --out OUT --part one     # one GPU, first call
    python bench/evaluation/gpu_targets.py --out OUT --part two --server_rate R
    python bench/evaluation/gpu_targets.py --out OUT --part four    # one GPU, then four

Every experiment runs through `dlbs run` (the PyTorch backend, ResNet-50, float16,
channels-last, compiled, synthetic samples) in a work folder; after each step OUT gets the
table so far (results.md, results.json) and every log, LoadGen's included (logs.tgz), so that
a call cut short still returns what it measured.

- part one: examples/evaluation.yaml as shipped but for exp.min_duration_s (single_stream,
  server at its target rate, offline and max_qps at batches 64 and 128, CUDA graphs on);
  `benchmark` and `offline` at batch 256; the plain PyTorch loop (plain_loop.py); offline at
  batch 256 with 1 inference stream.
- part two: max_qps at batches 64 and 128 without CUDA graphs; server at `--server_rate`
  (about 0.9 of the offline rate at batch 128) with 1 and with 2 inference streams.
- part four (several GPUs; the lead's call): offline at batch 256 and max_qps at batch 128
  on GPU 0, then on GPUs 0-3 as one system under test.
- part streams: offline and max_qps at the example's first batch (64) with 1 and with 2
  inference streams, the measurement behind exp.inference_streams' default for max_qps.
The targets (issue 18) are printed beside each ratio. `--device cpu --model tiny ...` runs
the same steps on a CPU, small and quick, which is how this script is rehearsed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from dlbs.results.protocol import parse_log  # noqa: E402

KEYS = ("results.qps", "results.throughput", "results.latency_p50", "results.latency_p99",
        "results.max_qps", "results.latency_bound_met", "results.loadgen_valid",
        "results.recompiles", "results.max_qps_trials", "results.target_qps",
        "results.status", "results.status_msg", "results.mem_peak")


def run_dlbs(work: Path, args: list[str], timeout: float) -> None:
    command = [sys.executable, "-m", "dlbs.cli.main", "run", *args]
    print("+ dlbs run", " ".join(args), flush=True)
    began = time.time()
    # dlbs runs its backend in a session of its own: a step cut short is stopped with SIGTERM,
    # which dlbs passes on to the backend (a SIGKILL would leave the backend running on the
    # GPUs and slow the next step down: seen on 4x H100, where it halved the next run).
    with subprocess.Popen(command, cwd=work, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
            print(stdout[-3000:], stderr[-3000:], flush=True)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
            print(f"(cut after {timeout:.0f} s)", flush=True)
    print(f"({time.time() - began:.0f} s)", flush=True)


def experiments(work: Path) -> list[dict]:
    """Every experiment log under `work`: its parameters and results."""
    found = []
    for path in sorted(work.rglob("*.log")):
        values = parse_log(path).values
        if "exp.scenario" not in values:
            continue
        row = {"log": str(path.relative_to(work)), "step": path.parent.name}
        for key in ("exp.scenario", "exp.replica_batch", "exp.num_gpus",
                    "exp.inference_streams", "exp.max_queue_delay_ms", "pytorch.cuda_graphs",
                    "exp.target_qps", *KEYS):
            if key in values:
                row[key] = values[key]
        found.append(row)
    return found


def find(rows: list[dict], step: str, scenario: str, batch: int, **more) -> dict | None:
    for row in rows:
        if row["step"] == step and row.get("exp.scenario") == scenario and \
                row.get("exp.replica_batch") == batch and \
                all(row.get(key.replace("__", ".")) == value for key, value in more.items()):
            return row
    return None


def ratio_row(name: str, measured: dict | None, key: str, reference: dict | None, ref_key: str,
              target: str, least: float | None) -> dict:
    value = measured.get(key) if measured else None
    base = reference.get(ref_key) if reference else None
    ratio = value / base if isinstance(value, (int, float)) and \
        isinstance(base, (int, float)) and base else None
    verdict = "" if ratio is None or least is None else ("met" if ratio >= least else "NOT met")
    return {"comparison": name, "measured": value, "reference": base, "ratio": ratio,
            "target": target, "verdict": verdict}


def table(rows: list[dict], plain: dict | None, big: int, batches: list[int]) -> list[dict]:
    """The issue's targets, from what was measured so far."""
    out = []
    bench = find(rows, "pair256", "benchmark", big)
    offlines = [row for row in rows if row["step"] == "pair256" and
                row.get("exp.scenario") == "offline" and row.get("exp.replica_batch") == big]
    for offline in offlines:
        out.append(ratio_row(f"offline QPS / benchmark throughput, batch {big}, "
                             f"{offline.get('exp.inference_streams')} stream(s)", offline,
                             "results.qps", bench, "results.throughput", ">= 0.97", 0.97))
        if plain:
            out.append(ratio_row(f"offline QPS / plain loop, batch {big}, "
                                 f"{offline.get('exp.inference_streams')} stream(s)", offline,
                                 "results.qps", {"t": plain.get("throughput")}, "t", "", None))
    single = find(rows, "example", "single_stream", 1)
    out.append({"comparison": "single_stream p50, ms", "measured":
                single.get("results.latency_p50") if single else None,
                "reference": plain.get("batch1_p50_ms") if plain else None,
                "ratio": None, "target": "<= 0.5 ms",
                "verdict": "" if not single else
                ("met" if single.get("results.latency_p50", 9) <= 0.5 else "NOT met")})
    for batch in batches:
        server = find(rows, "example", "server", batch)
        if server:
            met = server.get("results.latency_bound_met") is True and \
                server.get("results.latency_p99", 1e9) <= 15
            out.append({"comparison": f"server p99 at {server.get('exp.target_qps')} "
                                      f"queries/s, batch {batch}, ms",
                        "measured": server.get("results.latency_p99"), "reference": 15,
                        "ratio": None, "target": "<= 15 ms, bound met",
                        "verdict": "met" if met else "NOT met"})
        offline = find(rows, "example", "offline", batch)
        for step, graphs in (("example", "CUDA graphs"), ("nographs", "no CUDA graphs")):
            peak = find(rows, step, "max_qps", batch)
            if peak:
                out.append(ratio_row(f"max_qps ({graphs}) / offline (CUDA graphs), batch "
                                     f"{batch}", peak, "results.max_qps", offline,
                                     "results.qps", ">= 0.85", 0.85))
    for streams in (1, 2):
        server = find(rows, "streams", "server", batches[-1], exp__inference_streams=streams)
        if server:
            out.append({"comparison": f"server at {server.get('exp.target_qps')} queries/s, "
                                      f"batch {batches[-1]}, {streams} stream(s): p99 ms",
                        "measured": server.get("results.latency_p99"), "reference": None,
                        "ratio": None, "target": "knob", "verdict":
                            "bound met" if server.get("results.latency_bound_met") else
                            "bound broken"})
    for gpus in (1, 4):
        for scenario, key in (("offline", "results.qps"), ("max_qps", "results.max_qps")):
            batch = big if scenario == "offline" else batches[-1]
            row = find(rows, f"gpus{gpus}", scenario, batch)
            one = find(rows, "gpus1", scenario, batch)
            if row and gpus == 4:
                least = 3.8 if scenario == "offline" else 3.5
                out.append(ratio_row(f"{scenario} on 4 GPUs / 1 GPU, batch {batch}", row, key,
                                     one, key, f">= {least}", least))
    recompiled = [row["log"] for row in rows if row.get("results.recompiles")]
    failed = [f"{row['log']}: {row.get('results.status_msg')}" for row in rows
              if row.get("results.status") != "ok"]
    out.append({"comparison": "runs with results.recompiles > 0", "measured": len(recompiled),
                "reference": len(rows), "ratio": None, "target": "0",
                "verdict": "met" if not recompiled else "NOT met: " + ", ".join(recompiled)})
    if failed:
        out.append({"comparison": "failed runs", "measured": len(failed), "reference": None,
                    "ratio": None, "target": "0", "verdict": "; ".join(failed)})
    return out


def write(out: Path, work: Path, settings: dict, began: float) -> None:
    rows = experiments(work)
    plain_path = out / "plain.json"
    plain = json.loads(plain_path.read_text()) if plain_path.is_file() else None
    targets = table(rows, plain, settings["big_batch"],
                    [int(batch) for batch in settings["batches"].split(",")])
    result = {"settings": settings, "seconds": time.time() - began, "targets": targets,
              "experiments": rows, "plain": plain}
    replace_file(out / "results.json", (json.dumps(result, indent=2) + "\n").encode())

    def shown(value) -> str:
        if isinstance(value, float):
            return f"{value:.4g}"
        return "" if value is None else str(value)

    lines = ["| comparison | measured | reference | ratio | target | verdict |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {row['comparison']} | {shown(row['measured'])} | {shown(row['reference'])} "
              f"| {shown(row['ratio'])} | {row['target']} | {row['verdict']} |"
              for row in targets]
    lines += ["", "| step | scenario | batch | GPUs | streams | graphs | qps | max_qps | p50 ms "
              "| p99 ms | bound met | recompiles | trials | status |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {row['step']} | {row.get('exp.scenario')} | {row.get('exp.replica_batch')} | "
              f"{row.get('exp.num_gpus')} | {shown(row.get('exp.inference_streams'))} | "
              f"{shown(row.get('pytorch.cuda_graphs'))} | "
              f"{shown(row.get('results.qps', row.get('results.throughput')))} | "
              f"{shown(row.get('results.max_qps'))} | {shown(row.get('results.latency_p50'))} | "
              f"{shown(row.get('results.latency_p99'))} | "
              f"{shown(row.get('results.latency_bound_met'))} | "
              f"{shown(row.get('results.recompiles'))} | "
              f"{shown(row.get('results.max_qps_trials'))} | {row.get('results.status')} |"
              for row in rows]
    replace_file(out / "results.md", ("\n".join(lines) + "\n").encode())
    # Whole files only: a call cut short while this is written still returns the last one.
    # LoadGen's Chrome traces (offline: an event per sample, hundreds of MB) stay behind.
    with tarfile.open(out / "logs.tgz.part", "w:gz") as archive:
        archive.add(work, arcname="logs", filter=lambda info: None
                    if info.name.endswith("mlperf_log_trace.json") else info)
    os.replace(out / "logs.tgz.part", out / "logs.tgz")
    print("\n".join(lines), flush=True)


def replace_file(path: Path, data: bytes) -> None:
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    os.replace(part, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--part", choices=["one", "two", "four", "streams"], required=True)
    parser.add_argument("--work", default="", help="work folder (default: OUT/../eval-work)")
    parser.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--extra_models", default="", help="pytorch.extra_models (dlbs only)")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--batches", default="64,128", help="the example's batches (CPU: less)")
    parser.add_argument("--big_batch", type=int, default=256)
    parser.add_argument("--min_duration_s", type=float, default=10.0)
    parser.add_argument("--min_query_count", type=int, default=100)
    parser.add_argument("--num_batches", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--target_qps", type=float, default=0, help="0: the example's")
    parser.add_argument("--latency_bound_ms", type=float, default=15.0)
    parser.add_argument("--server_rate", type=float, default=0, help="part two's server rate")
    parser.add_argument("--plain_latency_batches", type=int, default=500)
    parser.add_argument("--deadline_s", type=float, default=3600,
                        help="start no step later than this many seconds after the start, "
                             "and cut a step that would run past it")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work).resolve() if args.work else out.parent / "eval-work"
    work.mkdir(parents=True, exist_ok=True)
    began = time.time()
    gpu = args.device == "gpu"
    common = ["-P", f"exp.model={args.model}", "-P", f"exp.dtype={args.dtype}",
              "-P", f"exp.min_duration_s={args.min_duration_s}",
              "-P", f"exp.min_query_count={args.min_query_count}",
              "-P", f"exp.latency_bound_ms={args.latency_bound_ms}",
              "-P", f"exp.num_warmup_batches={args.warmup}"]
    if args.extra_models:
        common += ["-P", f"pytorch.extra_models={args.extra_models}"]
    if not gpu:  # the rehearsal
        common += ["-P", "exp.gpus=", "-P", "pytorch.cuda_graphs=false",
                   "-P", "pytorch.num_threads=1", "-P", "pytorch.channels_last=false"]
    spec = ["-c", str(REPO / "examples" / "evaluation.yaml"), *common]
    if args.target_qps:
        spec += ["-P", f"exp.target_qps={args.target_qps}"]
    largest = args.batches.split(",")[-1]
    big = args.big_batch

    def left() -> float:
        """Seconds a step may take (the results must be written before the deadline)."""
        return args.deadline_s - (time.time() - began) - 20

    def step(name: str, scenarios: str, batches: str, *params: str) -> None:
        """The example with its variables (scenario, batch) set to these, and `params`."""
        if left() < 30:
            print(f"(skipped: {name} {scenarios} {batches} {params}: no time left)", flush=True)
            return
        run_dlbs(work, [*spec, "-V", f"exp.scenario={scenarios}",
                        "-V", f"exp.replica_batch=[{batches}]", *params,
                        "-P", f"exp.log_dir={name}"], left())
        write(out, work, vars(args), began)

    if args.part == "one":
        # Most needed first: a call cut short loses the least.
        step("example", '["single_stream", "server", "offline", "max_qps"]', args.batches)
        # The example's settings at batch 256: benchmark and offline (2 streams on a GPU).
        step("pair256", '["benchmark", "offline"]', str(big), "-P", "exp.phase=inference",
             "-P", f"exp.num_batches={args.num_batches}")
        plain = [sys.executable, str(HERE / "plain_loop.py"), "--model", args.model,
                 "--device", args.device, "--dtype", args.dtype, "--batch_size", str(big),
                 "--num_batches", str(args.num_batches), "--warmup", "20",
                 "--latency_batches", str(args.plain_latency_batches),
                 "--out", str(out / "plain.json"), "--compile"]
        if gpu:
            plain += ["--channels_last", "--cuda_graphs"]
        print("+", " ".join(plain[1:]), flush=True)
        if left() > 30:
            try:
                subprocess.run(plain, timeout=max(1.0, left()), check=False)
            except subprocess.TimeoutExpired:
                print("(the plain loop was cut)", flush=True)
            write(out, work, vars(args), began)
        step("pair256", '["offline"]', str(big), "-P", "exp.inference_streams=1")
    elif args.part == "two":
        step("nographs", '["max_qps"]', args.batches, "-P", "pytorch.cuda_graphs=false")
        if args.server_rate:
            step("streams", '["server"]', largest, "-P", f"exp.target_qps={args.server_rate}",
                 "-V", "exp.inference_streams=[1, 2]")
    elif args.part == "streams":
        first = args.batches.split(",")[0]
        step("streams", '["offline", "max_qps"]', first, "-V", "exp.inference_streams=[1, 2]")
    else:
        for name, gpus in (("gpus1", "0"), ("gpus4", "0,1,2,3")):
            where = ["-P", f"exp.gpus={gpus if gpu else ''}"]
            step(name, '["offline"]', str(big), *where)
            step(name, '["max_qps"]', largest, *where)
    print(f"({time.time() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
