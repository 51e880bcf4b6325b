"""A SLURM sweep one job at a time versus all in flight, against the ideal.

    .venv/bin/python bench/slurm_in_flight.py [--experiments 40] [--seconds 3] [--nodes 2]

Runs `dlbs run` twice on the cluster that `sbatch` reaches (the test cluster of
`.ci/services/slurm.sh`: two nodes), each time over the same sweep of dummy experiments
that each take `--seconds` (three batches of a third of it: `dummy.sleep` is per batch),
in exclusive jobs (one per node at a time):
- serial: `slurm.max_in_flight=1`, one job queued or running at a time;
- in flight: `slurm.max_in_flight=0`, every experiment submitted at once (one job array).
Ideal = experiments x seconds / nodes. It prints each run's wall time, its ratio to the
ideal, the time dlbs took to submit everything, and the mean time a job took from the
backend's first to last line (how much of a job is the benchmark itself). The goal is in
flight within 15 % of the ideal plus the submission time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from dlbs.results.protocol import parse_log


def run_sweep(folder: Path, experiments: int, seconds: float, in_flight: int) -> dict:
    """One `dlbs run` of the sweep in `folder`; its numbers."""
    batches = [str(i) for i in range(1, experiments + 1)]
    argv = [sys.executable, "-m", "dlbs.cli.main", "run", "-P", "exp.framework=dummy",
            "-P", "exp.scheduler=slurm", "-P", "exp.num_batches=3",
            "-P", "exp.num_warmup_batches=0", "-P", f"dummy.sleep={seconds / 3:g}",
            "-P", "slurm.exclusive=true", "-P", f"slurm.max_in_flight={in_flight}",
            "-V", f"exp.replica_batch=[{', '.join(batches)}]", "--progress", "lines"]
    begin = time.monotonic()
    result = subprocess.run(argv, cwd=folder, capture_output=True, text=True)
    wall = time.monotonic() - begin
    if result.returncode != 0:
        raise SystemExit(f"dlbs run failed ({result.returncode}):\n{result.stderr[-2000:]}")
    starts, ends, runs = [], [], []
    for log in (folder / "logs").glob("*.log"):
        values = parse_log(log).values
        start = datetime.fromisoformat(values["results.start_time"]).timestamp()
        end = datetime.fromisoformat(values["results.end_time"]).timestamp()
        starts.append(start)
        ends.append(end)
        runs.append(end - start)
    scripts = sorted((folder / "logs").glob("*.sbatch"))
    submitted = [p.stat().st_mtime for p in scripts]
    first_start = min(starts)
    return {"wall_s": round(wall, 1), "jobs_scripts": len(scripts),
            "benchmarks_span_s": round(max(ends) - first_start, 1),
            "submission_s": round(max(submitted) - min(submitted), 2) if submitted else None,
            "mean_benchmark_s": round(sum(runs) / len(runs), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--nodes", type=int, default=2)
    args = parser.parse_args()
    ideal = args.experiments * args.seconds / args.nodes
    report: dict = {"experiments": args.experiments, "seconds_each": args.seconds,
                    "nodes": args.nodes, "ideal_s": ideal, "host": os.uname().nodename,
                    "cpus": os.cpu_count()}
    for name, in_flight in (("serial", 1), ("in_flight", 0)):
        with tempfile.TemporaryDirectory(prefix=f"dlbs-bench-{name}-") as folder:
            numbers = run_sweep(Path(folder), args.experiments, args.seconds, in_flight)
        numbers["wall_over_ideal"] = round(numbers["wall_s"] / ideal, 3)
        report[name] = numbers
        print(f"{name:10} wall {numbers['wall_s']:7.1f} s = {numbers['wall_over_ideal']:.2f} x "
              f"ideal {ideal:.0f} s; mean benchmark {numbers['mean_benchmark_s']} s",
              flush=True)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
