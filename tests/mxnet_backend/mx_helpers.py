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
from tests.preloaded import MXNET

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


def write_record_file(path: Path, count: int, size: tuple[int, int]) -> list[float]:
    """Pack `count` random JPEGs (labels 0, 1, 2, ...) the way im2rec does; Pillow encodes."""
    import io

    import mxnet as mx
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(7)
    labels = []
    record = mx.recordio.MXRecordIO(str(path), "w")
    for index in range(count):
        pixels = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
        label = float(index % 5)
        record.write(mx.recordio.pack(mx.recordio.IRHeader(0, label, index, 0),
                                      buffer.getvalue()))
        labels.append(label)
    record.close()
    return labels


def run_process(argv: list[str], timeout: float = 240,
                env: dict[str, str] | None = None) -> BackendRun:
    """Run `argv` with the backend's environment (plus `env`); return its output and values.

    A Python script is forked from an interpreter that has imported MXNet
    (tests/preloaded.py); launchers (`-m`) and other commands start as they are.
    """
    full_env = {**backend_env(), **(env or {})}
    if argv[:1] == [sys.executable]:
        done = MXNET.run(argv[1:], full_env, cwd=REPO, timeout=timeout)
    else:
        done = subprocess.run(argv, env=full_env, capture_output=True, text=True,
                              timeout=timeout, cwd=REPO)
    return BackendRun(done.returncode, done.stdout, done.stderr, parse_protocol(done.stdout))
