"""The harness's host ceiling: how many samples a second it can push with no model at all.

    python bench/evaluation/host_ceiling.py --out OUT [--lanes 1,4,8] [--repeat 3]
        [--scenarios offline,max_qps] [--batch_size 256] [--max_qps_batch 128]
        [--duration_s 4] [--calibrated_rate 200000] [--max_qps_duration_s 1]
        [--max_qps_calibrated_rate 100000] [--baseline PYTHON_DIR]

The dummy backend's system under test (python/dummy_benchmarks) with no service time
(`--sleep 0`: a batch is one `time.sleep(0)`) and `--lanes` lanes standing in for GPUs
(`--device gpu --num_gpus N`, one stream each) runs LoadGen's offline at `--batch_size` and
max_qps at `--max_qps_batch` (a 15 ms p99 bound, issue 18's) through the harness of
python/benchmark_common, in the Python running this script. Each measurement is a process of
its own; they go round-robin over (scenario, lanes, tree) `--repeat` times, so load that
comes and goes on a shared machine falls on all of them alike.

The harness sizes LoadGen's run from its calibration (offline: a query of about 1.2 x the
calibrated rate x the minimum duration; max_qps: the first rate tried is 0.9 x it), which
with no service time would be whatever the lanes' bare loop reaches. So that every tree and
lane count serves the same run, batches before LoadGen's run (the preparation and the
calibration) take `lanes x batch / rate` seconds, the calibrated rate being
`--calibrated_rate` (offline) or `--max_qps_calibrated_rate`; inside LoadGen's run they take
no time. The defaults give an offline query of about a million samples, as the 4 x H100
measurement's (bench/evaluation/results/2026-11-26-4xH100/).

For each run: LoadGen's own figure (offline `results.qps`, max_qps `results.max_qps`), the
samples the lanes served inside LoadGen's runs, and the process's CPU seconds per sample
served, all threads (LoadGen's and the lanes'), from LoadGen's first load of the sample
library to the last batch: its query generation, the issue, the serving.
`--baseline PYTHON_DIR` runs the same with another tree's `python/` folder (another commit's
harness: `git archive main python | tar -x -C /tmp/main` gives /tmp/main/python): the table
then holds both, and the ratio of each median to the baseline's.

Writes OUT/results.json (every run), OUT/results.md (the table it prints) and LoadGen's
summary and detail logs of each run under OUT/loadgen/ (not its traces). The numbers are
this machine's: on a shared machine compare ratios within one run, never across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
#: max_qps's latency bound, ms (issue 18's).
LATENCY_BOUND_MS = 15.0


def measure(python_dir: str, scenario: str, lanes: int, batch: int, duration_s: float,
            calibrated_rate: float, folder: str) -> dict:
    """One LoadGen run of the dummy system in this process; what `main` tabulates."""
    import contextlib
    import io

    sys.path[:0] = [python_dir, os.path.join(python_dir, "dummy_benchmarks")]
    import benchmarks as dummy
    from benchmark_common import harness

    opts = dummy.parse_options([
        "--scenario", scenario, "--sleep", "0", "--batch_size", str(batch),
        "--device", "gpu", "--num_gpus", str(lanes), "--num_warmup_batches", "1",
        "--min_duration_s", str(duration_s), "--min_query_count", "1",
        "--latency_bound_ms", str(LATENCY_BOUND_MS), "--loadgen_dir", folder])
    system = dummy.dummy_system(opts)
    # (wall, CPU) at LoadGen's first load of the sample library (the harness loads it once
    # before, to prepare), at the first batch after it and at the last one.
    marks: dict[str, tuple[float, float]] = {}
    loads = [0]
    served = [0]
    lock = threading.Lock()
    load, submit = system.load, system.submit

    def load_marked(indices):
        if loads[0] == 1:
            marks["loadgen"] = (time.perf_counter(), time.process_time())
        loads[0] += 1
        return load(indices)

    def submit_counted(indices, top=0, lane=0):
        if "loadgen" not in marks:  # preparing or calibrating: paced (module doc)
            time.sleep(lanes * len(indices) / calibrated_rate)
            return submit(indices, top, lane)
        now = (time.perf_counter(), time.process_time())
        with lock:
            served[0] += len(indices)
            marks.setdefault("first", now)
            marks["last"] = now
        return submit(indices, top, lane)

    system.load, system.submit = load_marked, submit_counted
    failures: list[BaseException] = []
    with contextlib.redirect_stdout(io.StringIO()):  # the timed marks' protocol lines
        results = harness.run_evaluation(system, opts.evaluation, batch_size=batch, warmup=1,
                                         say=lambda line: None, abort=failures.append)
    end = (time.perf_counter(), time.process_time())
    if failures:
        raise SystemExit(f"the harness failed: {failures[0]!r}")
    (wall0, cpu0), (wall1, _), (wall2, cpu2) = marks["loadgen"], marks["first"], marks["last"]
    figure = results["results.max_qps"] if scenario == "max_qps" else results["results.qps"]
    return {"figure": figure, "served": served[0], "cpu_s": cpu2 - cpu0,
            "cpu_us_per_sample": 1e6 * (cpu2 - cpu0) / max(served[0], 1),
            "until_first_batch_s": wall1 - wall0, "serving_s": wall2 - wall1,
            "after_last_batch_s": end[0] - wall2,
            "valid": results.get("results.loadgen_valid"),
            "latency_p99": results.get("results.latency_p99"),
            "max_qps_trials": results.get("results.max_qps_trials")}


def run_one(python_dir: str, scenario: str, lanes: int, batch: int, duration_s: float,
            calibrated_rate: float, folder: Path) -> dict:
    command = [sys.executable, __file__, "--measure", python_dir, scenario, str(lanes),
               str(batch), str(duration_s), str(calibrated_rate), str(folder)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    # LoadGen's Chrome trace of an offline run has events per sample: hundreds of MB for the
    # default query of a million samples, for each run. The summary and the detail stay.
    (folder / "mlperf_log_trace.json").unlink(missing_ok=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(runs: list[dict], scenarios: list[str], lane_counts: list[int],
          trees: list[str]) -> tuple[list[dict], str]:
    """The medians of each (scenario, lanes, tree), with their ratios; and as markdown."""
    def figures(tree, scenario, lanes, key="figure"):
        return [r[key] for r in runs if (r["tree"], r["scenario"], r["lanes"]) ==
                (tree, scenario, lanes)]

    rows = []
    lines = ["| scenario | batch | lanes | tree | samples/s (median) | each repeat | "
             "CPU us per sample (median) | / baseline | / 1st lane count |",
             "|---|---:|---:|---|---:|---|---:|---:|---:|"]
    for scenario in scenarios:
        for lanes in lane_counts:
            for tree in trees:
                each = figures(tree, scenario, lanes)
                figure = statistics.median(each)
                cpu = statistics.median(figures(tree, scenario, lanes, "cpu_us_per_sample"))
                base = figures("baseline", scenario, lanes)
                versus = figure / statistics.median(base) if base and tree != "baseline" \
                    else None
                first = figures(tree, scenario, lane_counts[0])
                per_lane = figure / statistics.median(first) if lanes != lane_counts[0] \
                    else None
                batch = next(r["batch"] for r in runs if r["scenario"] == scenario)
                rows.append({"scenario": scenario, "batch": batch, "lanes": lanes,
                             "tree": tree, "figure": figure, "each": each,
                             "cpu_us_per_sample": cpu, "versus_baseline": versus,
                             "versus_first_lane_count": per_lane})
                lines.append(
                    f"| {scenario} | {batch} | {lanes} | {tree} | {figure:,.0f} | "
                    + ", ".join(f"{v:,.0f}" for v in each) + f" | {cpu:.2f} | "
                    + (f"{versus:.2f}" if versus else "") + " | "
                    + (f"{per_lane:.2f}" if per_lane else "") + " |")
    return rows, "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--measure":
        python_dir, scenario, lanes, batch, duration_s, rate, folder = sys.argv[2:9]
        print(json.dumps(measure(python_dir, scenario, int(lanes), int(batch),
                                 float(duration_s), float(rate), folder)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--lanes", default="1,4,8")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scenarios", default="offline,max_qps")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--max_qps_batch", type=int, default=128)
    parser.add_argument("--duration_s", type=float, default=4.0,
                        help="offline: LoadGen's minimum duration, s")
    parser.add_argument("--calibrated_rate", type=float, default=200_000.0,
                        help="offline: the rate the calibration measures, samples/s")
    parser.add_argument("--max_qps_duration_s", type=float, default=1.0,
                        help="max_qps: each trial's minimum duration, s")
    parser.add_argument("--max_qps_calibrated_rate", type=float, default=100_000.0,
                        help="max_qps: the rate the calibration measures, samples/s")
    parser.add_argument("--baseline", default="",
                        help="another tree's python/ folder, measured beside this one's")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    trees = {"this": str(REPO / "python")}
    if args.baseline:
        trees = {"baseline": str(Path(args.baseline).resolve()), **trees}
    lane_counts = [int(n) for n in args.lanes.split(",")]
    scenarios = args.scenarios.split(",")
    began = time.time()
    load_before = os.getloadavg()
    runs = []
    for repeat in range(args.repeat):
        for scenario in scenarios:
            for lanes in lane_counts:
                for tree, python_dir in trees.items():
                    if scenario == "max_qps":
                        batch, duration, rate = (args.max_qps_batch, args.max_qps_duration_s,
                                                 args.max_qps_calibrated_rate)
                    else:
                        batch, duration, rate = (args.batch_size, args.duration_s,
                                                 args.calibrated_rate)
                    folder = out / "loadgen" / f"{tree}-{scenario}-{lanes}-{repeat + 1}"
                    run = run_one(python_dir, scenario, lanes, batch, duration, rate, folder)
                    run.update(tree=tree, scenario=scenario, lanes=lanes, batch=batch,
                               repeat=repeat + 1)
                    runs.append(run)
                    print(f"{tree} {scenario} lanes={lanes} batch={batch}: "
                          f"{run['figure']:,.0f}/s, {run['served']:,} samples served, "
                          f"{run['cpu_us_per_sample']:.2f} CPU us per sample", flush=True)
    rows, text = table(runs, scenarios, lane_counts, list(trees))
    # The load averages (1, 5, 15 minutes) before and after: on a shared machine, what else
    # ran beside the measurement.
    load_after = os.getloadavg()
    machine = (f"{platform.machine()}, {os.cpu_count()} CPUs, load average "
               + "/".join(f"{v:.1f}" for v in load_before) + " before, "
               + "/".join(f"{v:.1f}" for v in load_after) + " after (1/5/15 min), "
               f"Python {platform.python_version()}")
    result = {"settings": vars(args), "trees": trees, "machine": machine,
              "load_average_before": load_before, "load_average_after": load_after,
              "seconds": time.time() - began, "runs": runs, "table": rows}
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    command = " ".join(["python", *sys.argv])
    (out / "results.md").write_text(text + f"\n\n{machine}\n\n    {command}\n")
    print(text)
    print(f"({result['seconds']:.0f} s; {machine})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
