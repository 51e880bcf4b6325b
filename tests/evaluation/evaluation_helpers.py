"""Helpers of the evaluation tests: the backends as subprocesses, and what `dlbs run` left."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlbs.results.protocol import parse_lines, parse_log

REPO = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO / "python"
BACKENDS = {name: PYTHON_DIR / f"{name}_benchmarks" / "benchmarks.py"
            for name in ("dummy", "pytorch", "mxnet")}

if str(PYTHON_DIR) not in sys.path:  # in-process tests import benchmark_common
    sys.path.insert(0, str(PYTHON_DIR))


@dataclass
class Run:
    """A finished backend process and the protocol values it printed."""

    returncode: int
    stdout: str
    stderr: str
    values: dict[str, Any]


def backend_env() -> dict[str, str]:
    """Few threads (CI has 2 cores), no GPU, no launcher rank."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "SLURM_NTASKS", "SLURM_PROCID")}
    env.update({"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"})
    return env


def run_backend(framework: str, *args: str, timeout: float = 300) -> Run:
    """Run a backend's benchmarks.py with `args`; parse what it printed."""
    done = subprocess.run([sys.executable, str(BACKENDS[framework]), *args],
                          capture_output=True, text=True, timeout=timeout, env=backend_env())
    values = parse_lines(done.stdout.splitlines()).values
    return Run(done.returncode, done.stdout, done.stderr, values)


def statuses(db: Path) -> list[tuple[str, str]]:
    """(exp_id, status) of every attempt in the results store, in the order they started."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT exp_id, status FROM attempts ORDER BY started_at").fetchall()


def logs_by_scenario(folder: Path) -> dict[str, dict[str, Any]]:
    """The values of each experiment log in `folder`, by its exp.scenario."""
    found = {}
    for log in sorted(folder.glob("*.log")):
        values = parse_log(log).values
        found[values["exp.scenario"]] = {**values, "log": log}
    return found
