r"""What the default energy read costs: one training run with and without it, back to back.

`dlbs run` reads the GPUs' energy counters at the backend's two marks of its timed interval by
default (`monitor.energy`, with `monitor.frequency` 0: docs/efficiency.md). This measures
its price two ways:

1. **the monitor alone**: a marks-only monitor (the one `dlbs run` starts) following a log
   for `--idle_s` seconds beside a sleeping process, against the same wait without it: the
   CPU time it takes (its looks at the log every 20 ms), and the time of one counter read;
2. **a training run**: ResNet-50 (synthetic data, the default) through `dlbs run`,
   `monitor.energy` on and off, the same experiment (`exp.rerun=always`; the parameter is
   `identity: false`, so one id), in the order off, on, on, off, ... (`--pairs` of each:
   drift of the clocks or the temperature falls on both alike); each on-run must have its
   energy (`nvml counter` on a GPU), each off-run none. The cost is the median throughput
   of the on-runs over that of the off-runs, minus 1 (negative: slower with the energy
   read), beside the spread of the runs of each side.

Usage (repository root; dlbs importable, e.g. through bench/device/setup_env.sh)::

    python bench/efficiency/energy_cost.py --out OUT                     # one GPU
    PYTHONPATH=tests/monitor/data/fake_nvml python bench/efficiency/energy_cost.py \
        --out OUT --gpus '' --monitor_gpus 0 --model resnet18 --batch 2 --dtype float32 \
        --warmup 1 --batches 5 --pairs 1 --idle_s 5                # CPU rehearsal

Writes `OUT/results.json` and `OUT/results.md` (and prints the Markdown), `OUT/run.log`
(everything the runs printed), `OUT/logs/` (their logs and results database). Exit status 0
when every run ended ok and the on/off runs have and lack their energy as they should.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dlbs.monitor import ResourceMonitor  # noqa: E402 - after the path is set
from dlbs.results.store import open_store  # noqa: E402

#: What the run must say about energy with the read on: a GPU's source, a CPU's reasons.
GPU_SOURCE = "nvml counter"


def cpu_seconds() -> float:
    """The CPU time of this process (all threads), seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def monitor_alone(gpus: str, seconds: float) -> dict[str, Any]:
    """The CPU time of a marks-only monitor over `seconds`, and one read at a mark."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "exp.log"
        log.write_text("")
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        try:
            before = cpu_seconds()
            threading.Event().wait(seconds)
            idle = cpu_seconds() - before
            monitor = ResourceMonitor(0, gpus=gpus, log=str(log))
            before = cpu_seconds()
            monitor.start(sleeper.pid)
            threading.Event().wait(seconds)
            with open(log, "a") as out:  # a mark: the monitor reads the counters at once
                marked = time.monotonic()
                out.write('__results.timed_start__="2026-01-01T00:00:00+00:00"\n')
            while monitor.samples_taken == 0 and time.monotonic() - marked < 5.0 \
                    and monitor.energy_unavailable is None:
                time.sleep(0.001)
            seen = time.monotonic() - marked
            series = monitor.stop()
            busy = cpu_seconds() - before
        finally:
            sleeper.kill()
            sleeper.wait()
    return {"seconds": seconds, "cpu_s_idle": idle, "cpu_s_with_monitor": busy,
            "monitor_cpu_pct_of_a_core": 100.0 * (busy - idle) / seconds,
            "mark_to_reading_s": seen if series.get("time") else None,
            "series": sorted(series), "energy_unavailable": monitor.energy_unavailable,
            "warnings": monitor.warnings,
            # The readings themselves: a counter that answers NaN still makes a series.
            "readings": {name: values for name, values in series.items()
                         if name in ("time", "gpu_energy", "cpu_energy")}}


def dlbs_run(args: argparse.Namespace, energy: bool, log: Any) -> None:
    """One `dlbs run` of the experiment with the energy read on or off."""
    command = [sys.executable, "-m", "dlbs.cli.main", "run", "--progress", "lines",
               "-P", "exp.framework=pytorch", "-P", f"exp.model={args.model}",
               "-P", f"exp.gpus={args.gpus}", "-P", f"exp.replica_batch={args.batch}",
               "-P", f"exp.dtype={args.dtype}", "-P", "exp.phase=training",
               "-P", f"exp.num_batches={args.batches}",
               "-P", f"exp.num_warmup_batches={args.warmup}", "-P", "monitor.frequency=0",
               "-P", f"monitor.energy={'true' if energy else 'false'}",
               "-P", f"exp.log_dir={args.out / 'logs'}", "-P", "exp.rerun=always",
               *[token for param in args.param for token in ("-P", param)]]
    print(f"=== energy {'on' if energy else 'off'}: {' '.join(command)}", file=log, flush=True)
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    log.write(done.stdout)
    print(f"=== exit {done.returncode}, {time.monotonic() - started:.1f} s", file=log,
          flush=True)


def runs(out: Path) -> list[dict[str, Any]]:
    """Every attempt of the database, oldest first: energy on or off, throughput, energy."""
    with open_store(str(out / "logs" / "results.db"), create=False, read_only=True) as store:
        attempts = sorted(store.attempts(), key=lambda a: a.attempt)
    found = []
    for attempt in attempts:
        values = {**attempt.results, **attempt.summary}
        found.append({
            "attempt": attempt.attempt, "status": attempt.status,
            "energy_read": bool(attempt.params.get("monitor.energy")),
            "throughput": values.get("results.throughput"),
            "energy_source": values.get("results.energy_source"),
            "energy_unavailable": values.get("results.energy_unavailable"),
            "power_avg_w": values.get("results.power_avg_w"),
            "energy_per_sample_j": values.get("results.energy_per_sample_j"),
            "use_keys": sorted(k for k in values if k.startswith("results.use.")),
            # What the monitor stored and the marks it was read against: a run without its
            # energy says why from these (results.json).
            "use_series": {k: values[k] for k in ("results.use.time", "results.use.gpu_energy",
                                                  "results.use.cpu_energy",
                                                  "results.use.warnings") if k in values},
            "marks": [values.get("results.timed_start"), values.get("results.timed_end")],
            "started_at": attempt.started_at})
    return found


def judge(rows: list[dict[str, Any]], gpu: bool) -> tuple[dict[str, Any], list[str]]:
    """The cost (median on / median off - 1) and what is wrong with the runs, if anything."""
    problems = []
    for row in rows:
        if row["status"] != "ok" or not isinstance(row["throughput"], int | float):
            problems.append(f"attempt {row['attempt']}: status {row['status']}")
        elif row["energy_read"] and gpu and row["energy_source"] != GPU_SOURCE:
            problems.append(f"attempt {row['attempt']}: energy read on, but energy source "
                            f"{row['energy_source']!r} ({row['energy_unavailable']})")
        elif row["energy_read"] and not gpu and not (row["energy_source"]
                                                     or row["energy_unavailable"]):
            problems.append(f"attempt {row['attempt']}: energy read on, but neither energy "
                            "nor the reason there is none")
        elif not row["energy_read"] and (row["energy_source"] or row["use_keys"]):
            problems.append(f"attempt {row['attempt']}: energy read off, but it has "
                            f"{row['energy_source'] or row['use_keys']}")
    on = [r["throughput"] for r in rows if r["energy_read"] and r["status"] == "ok"]
    off = [r["throughput"] for r in rows if not r["energy_read"] and r["status"] == "ok"]
    cost: dict[str, Any] = {"on": on, "off": off}
    if on and off:
        cost["median_on"], cost["median_off"] = statistics.median(on), statistics.median(off)
        cost["change"] = cost["median_on"] / cost["median_off"] - 1.0
        cost["spread_on"] = (max(on) - min(on)) / cost["median_on"]
        cost["spread_off"] = (max(off) - min(off)) / cost["median_off"]
    return cost, problems


def markdown(args: argparse.Namespace, alone: dict[str, Any], rows: list[dict[str, Any]],
             cost: dict[str, Any], problems: list[str]) -> str:
    lines = [f"# The default energy read: {args.model}, batch {args.batch}, {args.dtype}, "
             f"training, GPUs {args.gpus or 'none (CPU)'}", "",
             f"Monitor alone ({alone['seconds']:g} s beside a sleeping process): "
             f"{alone['monitor_cpu_pct_of_a_core']:.3f} % of a core; a mark to its reading "
             + (f"{alone['mark_to_reading_s'] * 1000:.1f} ms"
                if alone["mark_to_reading_s"] is not None
                else f"none ({alone['energy_unavailable']})") + ".", "",
             "| attempt | energy read | img/s | energy source | W | J/img |",
             "|---|---|---|---|---|---|"]

    def cell(value: Any, digits: int = 5) -> str:
        return f"{value:.{digits}g}" if isinstance(value, int | float) else "-"

    for row in rows:
        lines.append(f"| {row['attempt']} | {'on' if row['energy_read'] else 'off'} "
                     f"| {cell(row['throughput'])} | {row['energy_source'] or '-'} "
                     f"| {cell(row['power_avg_w'], 4)} | {cell(row['energy_per_sample_j'], 4)} |")
    lines.append("")
    if "change" in cost:
        lines.append(f"Throughput with the energy read over without, median of "
                     f"{len(cost['on'])} and {len(cost['off'])} runs: "
                     f"{cost['change'] * 100:+.2f} % (spread of the runs: on "
                     f"{cost['spread_on'] * 100:.2f} %, off {cost['spread_off'] * 100:.2f} %).")
    read = [row for row in rows if row["energy_read"] and row["energy_source"]]
    if not read:
        why = next((row["energy_unavailable"] for row in rows if row["energy_unavailable"]),
                   "none stored")
        lines.append(f"No energy counter was read here ({why}): with the read on, the monitor "
                     "had nothing to do, and the runs differ by noise alone.")
    lines += [f"- problem: {text}" for text in problems]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gpus", default="0", help="exp.gpus ('' for a CPU rehearsal)")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=2,
                        help="runs with and without the read (order off, on, on, off, ...)")
    parser.add_argument("--idle_s", type=float, default=10.0,
                        help="seconds the monitor alone is measured")
    parser.add_argument("--monitor_gpus", default=None,
                        help="the GPUs of the monitor alone (default: --gpus; a CPU "
                             "rehearsal gives 0 with the tests' NVML on PYTHONPATH)")
    parser.add_argument("--param", action="append", default=[],
                        help="another -P parameter for every run (repeatable)")
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    alone = monitor_alone(args.gpus if args.monitor_gpus is None else args.monitor_gpus,
                          args.idle_s)
    order = [energy for index in range(args.pairs)
             for energy in ((False, True) if index % 2 == 0 else (True, False))]
    with open(args.out / "run.log", "a") as log:
        for energy in order:
            dlbs_run(args, energy, log)
    rows = runs(args.out)[-len(order):]
    cost, problems = judge(rows, gpu=bool(args.gpus))
    (args.out / "results.json").write_text(json.dumps(
        {"monitor_alone": alone, "runs": rows, "cost": cost, "problems": problems,
         "settings": {k: str(v) for k, v in vars(args).items()}}, indent=1) + "\n")
    text = markdown(args, alone, rows, cost, problems)
    (args.out / "results.md").write_text(text)
    print(text)
    return 1 if problems or len(rows) != len(order) else 0


if __name__ == "__main__":
    sys.exit(main())
