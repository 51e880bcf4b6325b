"""The speed targets of LLM serving (docs/llm-serving.md), dlbs beside the plain reference.

    python bench/llm_serving/gpu_targets.py --out OUT     # on one GPU (run_on_device.sh)

Every dlbs step runs through `dlbs run` (the PyTorch backend's generation engine: Llama 3 8B,
bfloat16, random weights, compiled) in a work folder; the reference is reference.py (torch
and the model file only). After each step OUT gets the table so far (results.md,
results.json) and every log, LoadGen's included (logs.tgz), so that a call cut short still
returns what it measured. The steps (`--steps`), the most needed first:

1. `bench1`: dlbs `benchmark` at batch 1, 128 prompt tokens, 256 output tokens: decode
   tokens/s and the decode's share of the memory bandwidth (target: 240 tokens/s, 0.8 of
   4.8 TB/s);
2. `reference1`: the reference at batch 1 (same prompt and output) and its 1,024-token prefill;
3. `bench_big`, `reference_big`: dlbs and the reference at batch 64 (target: at least 1.0x);
4. `prefill`: dlbs `benchmark` of a 1,024-token prompt (its time to first token, target: at
   least 1.0x the reference's);
5. `offline`: dlbs over 64 slots (requests/s, tokens/s);
6. `server`: dlbs at `--server_fraction` of offline's requests/s (or `--server_rate`): TTFT and
   TPOT under MLPerf's bounds for Llama 3.1 8B (2,000 ms and 100 ms at p99);
7. `max_qps`: dlbs (target: at least 0.8 of offline's requests/s);
8. `offline_multi` (only when asked: `--steps offline,offline_multi` on a machine of four
   GPUs): offline over `--multi_gpus`, a replica on each (target: 3.5x one GPU's tokens/s).
The serving steps prepare one decode size, the slots (`--decode_sizes`: each size is a
compilation, and a loaded server runs the largest). A step starts only with `--min_step_s`
left before `--deadline_s`, and is cut at it. The
inductor and Triton caches live in the work folder, shared by the steps (a later step
compiles what an earlier one did from the cache). `--smoke` runs every step on the CPU with
the debug flavour, small and quick: how this script is rehearsed where there is no GPU.
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
sys.path.insert(0, str(REPO / "bench" / "evaluation"))

from gpu_targets import replace_file, run_dlbs  # noqa: E402

from dlbs.results.protocol import parse_log  # noqa: E402
from dlbs.results.summary import summarize  # noqa: E402

#: The steps, the most needed first (module doc).
STEPS = "bench1,reference1,bench_big,reference_big,prefill,offline,server,max_qps"
KEYS = ("exp.scenario", "exp.replica_batch", "exp.input_tokens", "exp.output_tokens",
        "exp.target_qps", "results.decode_tokens_per_second", "results.prefill_tokens_per_second",
        "results.tokens_per_second", "results.throughput", "results.time", "results.ttft_p50",
        "results.ttft_p99", "results.tpot_p50", "results.tpot_p99", "results.qps",
        "results.max_qps", "results.max_qps_trials", "results.latency_bound_met",
        "results.loadgen_valid", "results.recompiles", "results.decode_bandwidth",
        "results.decode_bandwidth_fraction", "results.decode_bytes_per_step",
        "results.mem_peak", "results.gpu_model", "results.status", "results.status_msg")


def experiments(work: Path) -> dict[str, dict]:
    """Each step's experiment (its folder's log): parameters, results, dlbs's summary."""
    found = {}
    for path in sorted(work.glob("*/*.log")):
        values = parse_log(path).values
        if "exp.scenario" not in values:
            continue
        values.update(summarize(values, values))
        row = {key: values[key] for key in KEYS if key in values}
        row["log"] = str(path.relative_to(work))
        found[path.parent.name] = row
    return found


def ratio(value, base) -> float | None:
    ok = isinstance(value, (int, float)) and isinstance(base, (int, float)) and base
    return value / base if ok else None


def targets(rows: dict[str, dict], reference: dict | None, settings: dict) -> list[dict]:
    """The issue's targets, from what was measured so far."""
    ref = reference or {}
    ref_batches = ref.get("batches", {})
    out = []

    def add(name, measured, against, value_ratio, target, least):
        verdict = "" if value_ratio is None or least is None else (
            "met" if value_ratio >= least else "NOT met")
        out.append({"comparison": name, "measured": measured, "reference": against,
                    "ratio": value_ratio, "target": target, "verdict": verdict})

    one = rows.get("bench1", {})
    tokens = one.get("results.decode_tokens_per_second")
    add(f"batch 1 decode tokens/s (dlbs, {settings['prompt']} + {settings['output']} tokens) "
        "/ 240", tokens, 240, ratio(tokens, 240), ">= 1.0", 1.0)
    add("batch 1 decode bandwidth fraction (dlbs)", one.get("results.decode_bandwidth_fraction"),
        None, None, "0.8 of 4.8 TB/s (the weights but the embedding table)", None)
    ref_one = ref_batches.get("1", {})
    ref_tokens = ref_one.get("decode_tokens_per_second")
    add("batch 1 decode tokens/s, dlbs / reference", tokens, ref_tokens,
        ratio(tokens, ref_tokens), "", None)
    add(f"batch 1 TTFT of {settings['prompt']} tokens, ms: reference / dlbs",
        one.get("results.ttft_p50"),
        ref_one.get("ttft_ms"), ratio(ref_one.get("ttft_ms"), one.get("results.ttft_p50")),
        "", None)
    big = rows.get("bench_big", {})
    ref_big = ref_batches.get(str(settings["big_batch"]), {})
    add(f"batch {settings['big_batch']} decode tokens/s, dlbs / reference",
        big.get("results.decode_tokens_per_second"), ref_big.get("decode_tokens_per_second"),
        ratio(big.get("results.decode_tokens_per_second"), ref_big.get("decode_tokens_per_second")),
        ">= 1.0", 1.0)
    prefill = rows.get("prefill", {})
    ref_prefill = ref.get("prefill", {})
    add(f"prefill of {settings['prefill']} tokens, TTFT ms: reference / dlbs",
        prefill.get("results.ttft_p50"), ref_prefill.get("ttft_ms"),
        ratio(ref_prefill.get("ttft_ms"), prefill.get("results.ttft_p50")), ">= 1.0", 1.0)
    server = rows.get("server")
    if server:
        met = server.get("results.latency_bound_met") is True
        out.append({"comparison": f"server at {server.get('exp.target_qps')} requests/s: TTFT "
                                  f"p99 / TPOT p99, ms", "measured":
                    f"{_shown(server.get('results.ttft_p99'))} / "
                    f"{_shown(server.get('results.tpot_p99'))}", "reference": None,
                    "ratio": None, "target": f"<= {settings['ttft_bound_ms']:g} / "
                                             f"{settings['tpot_bound_ms']:g}",
                    "verdict": "met" if met else "NOT met"})
    offline, peak = rows.get("offline", {}), rows.get("max_qps", {})
    add("max_qps / offline requests/s", peak.get("results.max_qps"), offline.get("results.qps"),
        ratio(peak.get("results.max_qps"), offline.get("results.qps")), ">= 0.8", 0.8)
    multi = rows.get("offline_multi", {})
    if multi:
        add(f"offline tokens/s over {settings['multi_gpus']} / one GPU",
            multi.get("results.tokens_per_second"), offline.get("results.tokens_per_second"),
            ratio(multi.get("results.tokens_per_second"),
                  offline.get("results.tokens_per_second")), ">= 3.5 (4 GPUs)", 3.5)
    recompiled = [name for name, row in rows.items() if row.get("results.recompiles")]
    out.append({"comparison": "runs with results.recompiles > 0", "measured": len(recompiled),
                "reference": len(rows), "ratio": None, "target": "0",
                "verdict": "met" if not recompiled else "NOT met: " + ", ".join(recompiled)})
    failed = [f"{name}: {row.get('results.status_msg')}" for name, row in rows.items()
              if row.get("results.status") != "ok"]
    if failed:
        out.append({"comparison": "failed runs", "measured": len(failed), "reference": None,
                    "ratio": None, "target": "0", "verdict": "; ".join(failed)})
    return out


def _shown(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def write(out: Path, work: Path, settings: dict, began: float) -> dict[str, dict]:
    rows = experiments(work)
    reference_path = out / "reference.json"
    reference = json.loads(reference_path.read_text()) if reference_path.is_file() else None
    table = targets(rows, reference, settings)
    result = {"settings": settings, "seconds": time.time() - began, "targets": table,
              "experiments": rows, "reference": reference}
    replace_file(out / "results.json", (json.dumps(result, indent=2) + "\n").encode())
    lines = ["| comparison | measured | reference | ratio | target | verdict |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {row['comparison']} | {_shown(row['measured'])} | "
              f"{_shown(row['reference'])} | {_shown(row['ratio'])} | {row['target']} | "
              f"{row['verdict']} |" for row in table]
    columns = ("exp.scenario", "exp.replica_batch", "results.decode_tokens_per_second",
               "results.tokens_per_second", "results.ttft_p50", "results.ttft_p99",
               "results.tpot_p50", "results.tpot_p99", "results.qps", "results.max_qps",
               "results.decode_bandwidth_fraction", "results.recompiles", "results.status")
    lines += ["", "| step | " + " | ".join(key.split(".")[1] for key in columns) + " |",
              "|---" * (len(columns) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(_shown(row.get(key)) for key in columns) + " |"
              for name, row in rows.items()]
    replace_file(out / "results.md", ("\n".join(lines) + "\n").encode())
    with tarfile.open(out / "logs.tgz.part", "w:gz") as archive:
        archive.add(work, arcname="logs", filter=lambda info: None
                    if info.name.endswith("mlperf_log_trace.json") or "cache" in info.name
                    else info)
    os.replace(out / "logs.tgz.part", out / "logs.tgz")
    print("\n".join(lines), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", default="", help="work folder (default: OUT/../llm-work)")
    parser.add_argument("--smoke", action="store_true",
                        help="the CPU rehearsal: the debug flavour, small and quick")
    parser.add_argument("--model", default="llama3_8b")
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--output", type=int, default=256)
    parser.add_argument("--prefill", type=int, default=1024)
    parser.add_argument("--big_batch", type=int, default=64)
    parser.add_argument("--slots", type=int, default=64, help="offline, server, max_qps")
    parser.add_argument("--num_batches", type=int, default=3)
    parser.add_argument("--min_duration_s", type=float, default=8.0)
    parser.add_argument("--min_query_count", type=int, default=64)
    parser.add_argument("--server_fraction", type=float, default=0.6,
                        help="the server's rate, of offline's requests/s")
    parser.add_argument("--ttft_bound_ms", type=float, default=2000.0)
    parser.add_argument("--tpot_bound_ms", type=float, default=100.0)
    parser.add_argument("--deadline_s", type=float, default=520,
                        help="start no step later than this many seconds after the start, "
                             "and cut a step that would run past it")
    parser.add_argument("--started_at", type=float, default=0,
                        help="when the call started (epoch seconds; default: now): the "
                             "deadline counts from it")
    parser.add_argument("--min_step_s", type=float, default=45)
    parser.add_argument("--steps", default=STEPS, help="which steps, in this order")
    parser.add_argument("--server_rate", type=float, default=0,
                        help="the server's rate, requests/s (0: --server_fraction of offline's)")
    parser.add_argument("--multi_gpus", default="0,1,2,3",
                        help="the offline_multi step's exp.gpus (one engine on each)")
    parser.add_argument("--decode_sizes", default="",
                        help="exp.decode_sizes of offline, server and max_qps (empty: the "
                             "slots alone: one compilation, the size a loaded server runs)")
    args = parser.parse_args()
    if args.smoke:
        args.model, args.prompt, args.output, args.prefill = "llama3_debug", 24, 12, 96
        args.big_batch, args.slots, args.num_batches = 4, 4, 2
        args.min_duration_s, args.min_query_count = 0.5, 12
        args.ttft_bound_ms, args.tpot_bound_ms, args.min_step_s = 1000.0, 100.0, 10
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work).resolve() if args.work else out.parent / "llm-work"
    work.mkdir(parents=True, exist_ok=True)
    # One inductor and Triton cache for every step (and the reference).
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(work / "inductor-cache"))
    os.environ.setdefault("TRITON_CACHE_DIR", str(work / "triton-cache"))
    began = args.started_at or time.time()
    settings = vars(args)
    common = ["-P", f"exp.model={args.model}", "-P", "exp.phase=inference",
              "-P", f"exp.input_tokens={args.prompt}", "-P", f"exp.output_tokens={args.output}",
              "-P", "pytorch.compile=true", "-P", f"exp.num_batches={args.num_batches}",
              "-P", "exp.num_warmup_batches=1", "-P", f"exp.min_duration_s={args.min_duration_s}",
              "-P", f"exp.min_query_count={args.min_query_count}",
              "-P", f"exp.ttft_bound_ms={args.ttft_bound_ms}",
              "-P", f"exp.tpot_bound_ms={args.tpot_bound_ms}"]
    if args.smoke:
        common += ["-P", "exp.gpus=", "-P", "exp.dtype=float32", "-P", "pytorch.num_threads=1",
                   "-P", "exp.compile_backend=aot_eager", "-P", "exp.num_samples=32"]
    else:
        common += ["-P", "exp.gpus=0", "-P", "exp.dtype=bfloat16"]
    reference = [sys.executable, str(HERE / "reference.py"), "--model", args.model,
                 "--prompt", str(args.prompt), "--output", str(args.output),
                 "--repeats", str(args.num_batches)]
    reference += (["--device", "cpu", "--dtype", "float32", "--compile", "0"] if args.smoke
                  else ["--device", "cuda", "--dtype", "bfloat16"])

    def left() -> float:
        """Seconds a step may take.

        The results are written, and a step cut at it has ended (SIGTERM, then its grace),
        before the deadline.
        """
        return args.deadline_s - (time.time() - began) - 30

    def step(name: str, *params: str) -> None:
        if left() < args.min_step_s:
            print(f"(skipped: {name}: no time left)", flush=True)
            return
        run_dlbs(work, [*common, *params, "-P", f"exp.log_dir={name}"], left())
        write(out, work, settings, began)

    def run_reference(part: str, *flags: str) -> None:
        if left() < args.min_step_s:
            print(f"(skipped: the reference's {part}: no time left)", flush=True)
            return
        path = work / f"reference-{part}.json"  # OUT keeps the merged one (few files back)
        command = [*reference, *flags, "--out", str(path)]
        print("+", " ".join(command[1:]), flush=True)
        began_step = time.time()
        try:
            subprocess.run(command, timeout=max(1.0, left()), check=False)
        except subprocess.TimeoutExpired:
            print(f"(the reference's {part} was cut)", flush=True)
        print(f"({time.time() - began_step:.0f} s)", flush=True)
        merged: dict = {"batches": {}}
        for found in sorted(work.glob("reference-*.json")):
            data = json.loads(found.read_text())
            merged["batches"].update(data.pop("batches", {}))
            merged.update(data)
        replace_file(out / "reference.json", (json.dumps(merged, indent=2) + "\n").encode())
        write(out, work, settings, began)

    serving = ["-P", f"exp.replica_batch={args.slots}",
               "-P", f"exp.decode_sizes={args.decode_sizes or args.slots}"]
    for name in args.steps.split(","):
        if name == "bench1":
            step(name, "-P", "exp.replica_batch=1")
        elif name == "reference1":
            run_reference("one", "--batches", "1", "--prefill", str(args.prefill))
        elif name == "prefill":
            step(name, "-P", "exp.replica_batch=1", "-P", f"exp.input_tokens={args.prefill}",
                 "-P", "exp.output_tokens=2", "-P", f"exp.num_batches={max(5, args.num_batches)}")
        elif name == "reference_big":
            run_reference("big", "--batches", str(args.big_batch), "--prefill", "0")
        elif name == "bench_big":
            step(name, "-P", f"exp.replica_batch={args.big_batch}")
        elif name == "offline":
            step(name, "-P", "exp.scenario=offline", *serving)
        elif name == "server":
            offline_qps = experiments(work).get("offline", {}).get("results.qps")
            rate = args.server_rate or (args.server_fraction * offline_qps
                                        if isinstance(offline_qps, (int, float)) else 0)
            if rate > 0:
                step(name, "-P", "exp.scenario=server", "-P", f"exp.target_qps={rate:.4g}",
                     *serving)
            else:
                print("(skipped: server: no offline rate to start from; give --server_rate)",
                      flush=True)
        elif name == "max_qps":
            step(name, "-P", "exp.scenario=max_qps", *serving)
        elif name == "offline_multi":  # a machine of several GPUs (not in the default steps)
            step(name, "-P", "exp.scenario=offline", *serving,
                 "-P", f"exp.gpus={'' if args.smoke else args.multi_gpus}")
        else:
            raise SystemExit(f"unknown step {name!r}; expected some of {STEPS}")
    print(f"({time.time() - began:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
