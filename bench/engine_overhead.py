"""Engine overhead of `dlbs run`: what dlbs adds per experiment on top of the backend.

Runs N `dummy` experiments (sleep 0) end to end on bare metal with `dlbs run`, then runs
the very same backend commands (taken from `dlbs run --dry-run`) directly, one process after
another. Overhead = (wall time of the sweep - wall time of the direct runs) / N: planning,
the results store, log headers and parsing, targets, progress.

    python bench/engine_overhead.py [--experiments 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=1000)
    args = parser.parse_args()
    count = args.experiments
    spec = ["-P", "exp.framework=dummy", "-P", "dummy.sleep=0", "-P", "exp.num_batches=1",
            "-P", "exp.num_warmup_batches=0",
            "-V", f"exp.replica_batch={list(range(1, count + 1))}"]
    dlbs = [sys.executable, "-m", "dlbs.cli.main"]
    with tempfile.TemporaryDirectory() as folder:
        dry = subprocess.run([*dlbs, "run", *spec, "--dry-run"], cwd=folder, check=True,
                             capture_output=True, text=True)
        requests = [json.loads(line) for line in dry.stdout.splitlines()]
        assert len(requests) == count, len(requests)

        start = time.perf_counter()
        sweep = subprocess.run([*dlbs, "run", *spec, "--progress", "lines"], cwd=folder,
                               capture_output=True, text=True)
        sweep_wall = time.perf_counter() - start
        if sweep.returncode != 0:
            raise SystemExit(f"the sweep failed: {sweep.stderr[-2000:]}")

        env = dict(os.environ)
        start = time.perf_counter()
        for request in requests:
            run_env = dict(env, **request["env"])
            with open(os.devnull, "wb") as sink:
                subprocess.run(request["argv"], env=run_env, stdout=sink, stderr=sink,
                               check=True)
        direct_wall = time.perf_counter() - start

    overhead_ms = (sweep_wall - direct_wall) / count * 1000
    print(f"experiments            {count}")
    print(f"dlbs run wall          {sweep_wall:.2f} s")
    print(f"backends alone wall    {direct_wall:.2f} s")
    print(f"engine overhead        {overhead_ms:.2f} ms per experiment")


if __name__ == "__main__":
    main()
