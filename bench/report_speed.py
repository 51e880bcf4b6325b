"""How long `dlbs report` and `dlbs compare` take over a store of 100,000 experiments.

    .venv/bin/python bench/report_speed.py [--experiments 100000] [--batches 100]
        [--folder /tmp/dlbs-report-speed] [--repeat 5] [--phases]

Builds two results databases in FOLDER (kept and reused when they hold the asked size; an
older schema is migrated on the way): `base.db`, and `new.db` with the same experiments
measured again, 1% of them planted 10% slower. An experiment is a real plan's experiment
(examples/gpu_scaling.yaml, about 60 parameters) varied over 25 models, 4 replica batches,
1/2/4/8 GPUs and a user axis `trial`, with its id computed as the planner computes it, 100
per-batch times and 10 warm-up batches as the PyTorch backend prints them.

Then times, as a user waits for them (a subprocess each, --repeat times):
  dlbs report base.db --type weak -o OUT.txt
  dlbs report base.db --type regular --format csv -o OUT.csv
  dlbs compare base.db new.db -o OUT.txt          (exit 1: the planted slowdowns)
and prints, per command, the best wall time with the load average at that run and the best
CPU time (user + system, which waiting for a core on a shared machine does not inflate).
`--phases` also times a report in-process: reading, building the table, rendering.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dlbs.config.loader import load_spec  # noqa: E402
from dlbs.plan.builder import plan  # noqa: E402
from dlbs.plan.identity import ID_PARAMS, SET  # noqa: E402
from dlbs.report.identity import is_identity_key, key_rules  # noqa: E402
from dlbs.results.store import Attempt, open_store  # noqa: E402

MODELS = [f"model{index:02d}" for index in range(25)]
BATCHES = [32, 64, 128, 256]
GPUS = ["0", "0,1", "0,1,2,3", "0,1,2,3,4,5,6,7"]
SLOWDOWN = 1.10
SLOW_FRACTION = 0.01


def template() -> dict:
    """One resolved experiment of a real plan: the parameters every experiment starts from.

    Its stored identity set (exp.id_params) gains the user axis `trial` that experiments()
    adds, as the planner would have set it.
    """
    experiment = dict(plan(load_spec(REPO / "examples" / "gpu_scaling.yaml"))[0])
    stored = experiment.get(ID_PARAMS)
    if isinstance(stored, dict):
        experiment[ID_PARAMS] = {**stored, SET: [*stored[SET], "trial"]}
    return experiment


def experiments(count: int) -> list[dict]:
    """`count` distinct experiments with planner-style ids."""
    base = template()
    rules = key_rules()
    per_trial = len(MODELS) * len(BATCHES) * len(GPUS)
    found = []
    for index in range(count):
        trial, rest = divmod(index, per_trial)
        model = MODELS[rest % len(MODELS)]
        batch = BATCHES[(rest // len(MODELS)) % len(BATCHES)]
        gpus = GPUS[rest // (len(MODELS) * len(BATCHES))]
        count_gpus = len(gpus.split(","))
        item = dict(base)
        item.update({
            "exp.model": model, "exp.replica_batch": batch, "exp.gpus": gpus,
            "exp.num_local_gpus": count_gpus, "exp.num_gpus": count_gpus,
            "exp.num_local_replicas": count_gpus, "exp.num_replicas": count_gpus,
            "exp.effective_batch": batch * count_gpus, "trial": trial,
            "pytorch.args": [f"--model {model}", f"--batch_size {batch}",
                             f"--num_gpus {count_gpus}", *base.get("pytorch.args", [])[3:]],
        })
        identity = {k: v for k, v in item.items() if k != "exp.id" and is_identity_key(k, rules)}
        digest = hashlib.sha256(orjson.dumps(identity, option=orjson.OPT_SORT_KEYS))
        exp_id = digest.hexdigest()[:12]
        item["exp.id"] = exp_id
        item["exp.log_file"] = f"logs/{model}_{batch}_{exp_id}.log"
        found.append(item)
    return found


def results(rng: np.random.Generator, experiment: dict, batches: int, factor: float,
            ended: datetime) -> dict:
    """What the PyTorch backend prints: per-batch times and its own (ddof=0) summary."""
    mean = 20.0 + 3.0 * MODELS.index(experiment["exp.model"]) + experiment["exp.replica_batch"] / 8
    mean *= factor * (1.0 + 0.02 * np.log2(experiment["exp.num_gpus"]))
    times = rng.normal(mean, mean * 0.02, batches).clip(min=mean * 0.5)
    warmup = rng.normal(mean * 3, mean * 0.5, 10).clip(min=mean)
    return {
        "results.time": float(times.mean()), "results.time_std": float(times.std()),
        "results.time_median": float(np.median(times)),
        "results.time_p90": float(np.percentile(times, 90)),
        "results.time_p95": float(np.percentile(times, 95)),
        "results.time_p99": float(np.percentile(times, 99)),
        "results.time_data": [float(t) for t in times],
        "results.warmup_time_data": [float(t) for t in warmup],
        "results.throughput": experiment["exp.effective_batch"] * 1000.0 / float(times.mean()),
        "results.mem_peak": 20000.0, "exp.framework_ver": "2.11.0+cu130",
        "results.start_time": (ended - timedelta(seconds=30)).isoformat(),
        "results.end_time": ended.isoformat(),
    }


def build(path: Path, items: list[dict], batches: int, seed: int, slow: set[int]) -> None:
    """A database of one ok attempt per experiment (rebuilt unless it has them all)."""
    if path.exists():
        with open_store(path) as store:
            if len(store.latest_statuses()) == len(items):
                return
        path.unlink()
    rng = np.random.default_rng(seed)
    environment = {"host": "bench", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8,
                   "gpu_driver": "580.159.04", "cpu_model": "AMD EPYC", "dlbs_version": "0.1.0"}
    start = datetime(2026, 11, 26, tzinfo=UTC)

    def attempts():
        for index, item in enumerate(items):
            ended = start + timedelta(seconds=index)
            factor = SLOWDOWN if index in slow else 1.0
            yield Attempt(item["exp.id"], 1, "ok", None, item,
                          results(rng, item, batches, factor, ended), item["exp.log_file"],
                          environment, None, (ended - timedelta(seconds=31)).isoformat(),
                          ended.isoformat())

    began = time.perf_counter()
    with open_store(path) as store:
        store.record_attempts(attempts())
    print(f"built {path} ({len(items)} experiments) in {time.perf_counter() - began:.0f} s; "
          f"{path.stat().st_size / 2**20:.0f} MiB", flush=True)


def timed(command: list[str], repeat: int,
          ok: tuple[int, ...] = (0,)) -> tuple[float, float, float]:
    """Best wall time, the load average at that run, best CPU time of `repeat` runs.

    CPU time is user + system. A subprocess each, as a user runs it. On a shared machine
    the wall time includes waiting for a core; the CPU time is what the command itself used.
    """
    best_wall = best_cpu = float("inf")
    load = 0.0
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode not in ok:
            raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if elapsed < best_wall:
            best_wall, load = elapsed, os.getloadavg()[0]
        best_cpu = min(best_cpu, cpu)
    return best_wall, load, best_cpu


def phases(database: Path) -> str:
    """A weak report of `database` in this process: CPU seconds of each step."""
    from dlbs.report import Options, build_report, render
    from dlbs.results.sources import load_attempts
    from dlbs.util.gc import no_cyclic_gc

    with no_cyclic_gc():
        began = time.process_time()
        attempts = load_attempts([database])
        read = time.process_time()
        report = build_report(attempts, Options(kind="weak"))
        built = time.process_time()
        render(report, "text")
        rendered = time.process_time()
    return (f"in-process weak report: reading {read - began:.2f} s, building "
            f"{built - read:.2f} s, rendering {rendered - built:.2f} s (CPU)")


def main() -> None:
    """Build the stores, time the commands, print the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--folder", default="/tmp/dlbs-report-speed")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--phases", action="store_true",
                        help="also time a weak report's steps in-process")
    args = parser.parse_args()
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    items = experiments(args.experiments)
    slow = set(range(0, len(items), int(1 / SLOW_FRACTION)))
    build(folder / "base.db", items, args.batches, 1, set())
    build(folder / "new.db", items, args.batches, 2, slow)
    dlbs = [sys.executable, "-m", "dlbs.cli.main"]
    os.chdir(REPO)
    runs = {
        "report --type weak (text)": (
            [*dlbs, "report", str(folder / "base.db"), "--type", "weak",
             "-o", str(folder / "weak.txt")], (0,)),
        "report --type regular --format csv": (
            [*dlbs, "report", str(folder / "base.db"), "--format", "csv",
             "-o", str(folder / "regular.csv")], (0,)),
        "compare base.db new.db": (
            [*dlbs, "compare", str(folder / "base.db"), str(folder / "new.db"),
             "-o", str(folder / "compare.txt")], (1,)),
        "python -c 'import dlbs' (start-up, for reference)": (
            [sys.executable, "-c", "import dlbs.cli.main"], (0,)),
    }
    print(f"{platform.node()}: {os.cpu_count()} CPUs, {platform.processor() or 'cpu'}, "
          f"Python {platform.python_version()}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, (command, ok) in runs.items():
        wall, load, cpu = timed(command, args.repeat, ok)
        print(f"{name:52s} wall {wall:6.2f} s (load {load:4.2f}), CPU {cpu:6.2f} s "
              f"(best of {args.repeat})", flush=True)
    compare_text = (folder / "compare.txt").read_text()
    print(compare_text.splitlines()[0])
    if args.phases:
        print(phases(folder / "base.db"))


if __name__ == "__main__":
    main()
