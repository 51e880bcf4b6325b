"""Shared helpers of the results tests: experiment dicts and the CLI as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


def experiment(model: str, gpus: int, replica_batch: int, time_ms: float | None,
               status: str | None = "ok", exp_id: str | None = None,
               dtype: str = "float32", phase: str = "training", device: str = "gpu",
               effective_batch: int | None = None, end_time: str | None = None,
               **extra: Any) -> dict[str, Any]:
    """A flat experiment dict as `dlbs parse` gives one."""
    result: dict[str, Any] = {
        "exp.id": exp_id or f"{model}-{dtype}-{phase}-{gpus}-{replica_batch}",
        "exp.model": model, "exp.framework": "pytorch", "exp.dtype": dtype,
        "exp.phase": phase, "exp.device_type": device,
        "exp.num_gpus": gpus if device == "gpu" else 0,
        "exp.replica_batch": replica_batch,
        "exp.effective_batch": effective_batch or replica_batch * max(gpus, 1),
    }
    if time_ms is not None:
        result["results.time"] = time_ms
    if status is not None:
        result["results.status"] = status
    if end_time is not None:
        result["results.end_time"] = end_time
    result.update(extra)
    return result


def write_log(path: Path, values: dict[str, Any], noise: bool = True) -> Path:
    """A log in the protocol (header, some backend chatter, results)."""
    import json

    lines = [f"__{key}__={json.dumps(value)}" for key, value in values.items()]
    if noise:
        lines.insert(len(lines) // 2, "some backend output that is not a protocol line")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def dlbs_cli(*args: str, cwd: Path | None = None,
             timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run `python -m dlbs.cli.main ARGS` as a user would (the repo on PYTHONPATH)."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = str(REPO) + os.pathsep + environment.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "dlbs.cli.main", *args], cwd=cwd or REPO, env=environment,
        capture_output=True, text=True, timeout=timeout, check=False,
    )
