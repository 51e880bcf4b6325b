"""bench/gpu_scaling/run_on_device.sh, its dlbs part rehearsed on the CPU with the dummy backend.

On the GPU machine the script runs PyTorch at 1, 2 and 4 GPUs beside plain DDP; here the
dummy backend stands in for PyTorch (no references), so the run, the reports, the charts and
the HTML page it makes are checked before device time is spent on them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.report.conftest import REPO

SCRIPT = REPO / "bench" / "gpu_scaling" / "run_on_device.sh"


@pytest.mark.slow
def test_the_device_script_makes_every_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    environment = dict(os.environ, PYTHON=sys.executable)
    result = subprocess.run(["bash", str(SCRIPT), str(out), "dummy", "10"], cwd=tmp_path,
                            env=environment, capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for name in ("run.log", "weak.md", "weak.csv", "weak.json", "weak_monitor.md",
                 "weak_scaling.svg", "weak_scaling.png", "monitor.svg", "report.html",
                 "reference.log", "logs/results.db"):
        assert (out / name).stat().st_size > 0, name
    document = json.loads((out / "weak.json").read_text())
    assert {(row["model"], row["gpus"]) for row in document["rows"]} == {
        (model, gpus) for model in ("resnet50", "resnet152") for gpus in (1, 2, 4)}
    assert "| resnet50 | 256 | 100 |" in (out / "weak.md").read_text()   # issue 23: 100.00
    assert "CPU mean (% of a core)" in (out / "weak_monitor.md").read_text()
    assert "<svg" in (out / "report.html").read_text()
    # Logs stay inside OUT, not in the folder the script was started from.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]


def test_vs_reference_puts_dlbs_beside_plain_ddp(tmp_path: Path) -> None:
    weak = {"format": "dlbs-report", "version": 2, "type": "weak", "rows": [
        {"model": "resnet50", "gpus": 1, "throughput": 5700.0, "use.gpu_util_mean": 98.0},
        {"model": "resnet50", "gpus": 2, "throughput": 11100.0, "use.gpu_util_mean": 97.5},
        {"model": "resnet152", "gpus": 1, "throughput": 2700.0}]}
    (tmp_path / "weak.json").write_text(json.dumps(weak))
    # As the script writes it: the GPU count, then what rank 0 of ddp_reference.py printed.
    (tmp_path / "reference.log").write_text(
        "__ref.gpus__=1\n__ref.time__=44.0\n__ref.throughput__=5800.0\n"
        "__ref.gpus__=2\n__ref.throughput__=11000.0\n__ref.gpus__=4\nRuntimeError: NCCL\n")
    result = subprocess.run([sys.executable, str(SCRIPT.parent / "vs_reference.py"),
                             str(tmp_path / "weak.json"), str(tmp_path / "reference.log")],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[4] == "| 1 | 5700.0 | 5800.0 | 0.983 | 100.0 % | 100.0 % | 98 % |"
    assert lines[5] == "| 2 | 11100.0 | 11000.0 | 1.009 | 97.4 % | 94.8 % | 98 % |"
    assert len(lines) == 6                       # no 4-GPU row: neither side has one
