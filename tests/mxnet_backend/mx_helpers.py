"""Helpers of the MXNet backend tests: the backend as a subprocess, and its log parsed.

The backend is run the way `dlbs` runs it, as `python python/mxnet_benchmarks/benchmarks.py`,
and its output is read with dlbs's own protocol parser.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlbs.results.protocol import ProtocolParser

REPO = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO / "python"
BENCHMARKS = PYTHON_DIR / "mxnet_benchmarks" / "benchmarks.py"

# In-process tests import the backend package the way benchmarks.py does.
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


@dataclass
class BackendRun:
    """A finished backend (or launcher) process and the protocol values it printed."""

    returncode: int
    stdout: str
    stderr: str
    values: dict[str, Any]


def parse_protocol(stdout: str) -> dict[str, Any]:
    """The `__key__=json` values of `stdout`, last occurrence winning."""
    parser = ProtocolParser()
    parser.feed_lines(stdout.splitlines())
    return parser.result.values


def backend_env() -> dict[str, str]:
    """The environment of a backend subprocess: two threads, as on the 2-core CI machine."""
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "2"
    env["PYTHONPATH"] = str(PYTHON_DIR)
    return env


def run_process(argv: list[str], timeout: float = 240) -> BackendRun:
    """Run `argv` with the backend's environment; return its output and parsed values."""
    done = subprocess.run(argv, env=backend_env(), capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
    return BackendRun(done.returncode, done.stdout, done.stderr, parse_protocol(done.stdout))
