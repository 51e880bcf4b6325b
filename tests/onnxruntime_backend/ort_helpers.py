"""Helpers for the ONNX Runtime backend's tests: run it as a subprocess, parse its keys."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON_DIR = ROOT / "python"
BACKEND = PYTHON_DIR / "onnxruntime_benchmarks" / "benchmarks.py"
KEY_LINE = re.compile(r"^__([A-Za-z0-9_.-]+)__=(.*)$")
#: The flags of a small CPU inference run; tests add --model and the rest.
CPU = ["--forward_only", "--device", "cpu", "--num_threads", "1", "--num_batches", "3",
       "--num_warmup_batches", "1"]

if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


@dataclass
class BackendRun:
    """What one backend process did: exit status, output and its ``__key__`` values."""

    returncode: int
    stdout: str
    stderr: str
    values: dict = field(default_factory=dict)


def run_backend(*args: str, env: dict[str, str] | None = None,
                timeout: float = 300) -> BackendRun:
    """Run benchmarks.py with ``args`` and parse what it printed."""
    full_env = dict(os.environ)
    full_env.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, str(BACKEND), *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=ROOT)
    values = {}
    for line in proc.stdout.splitlines():
        match = KEY_LINE.match(line.strip())
        if match:
            values[match.group(1)] = json.loads(match.group(2))
    return BackendRun(proc.returncode, proc.stdout, proc.stderr, values)


def write_linear_model(path: Path, batch: int | str = "N", features: int = 4,
                       dtype: str = "float32") -> Path:
    """A .onnx file: y = relu(x @ W), W fixed, x of shape [batch, features] (no torch)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    elem = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}[dtype]
    weight = numpy_helper.from_array(
        np.arange(features * 3, dtype=dtype).reshape(features, 3) / 10, name="W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "linear", [helper.make_tensor_value_info("x", elem, [batch, features])],
        [helper.make_tensor_value_info("y", elem, [batch, 3])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path
