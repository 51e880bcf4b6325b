"""The resource monitor's summaries as report columns ("was the GPU busy?" next to the speed).

A real sweep of the dummy backend on two "GPUs", sampled by the real monitor; the GPUs
answer through the stand-in nvidia-smi of tests/monitor/data (two_gpus.csv: 87 and 91 %
busy, 45123 and 44980 MiB, 512.34 and 498.10 W).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.report.conftest import REPO, dummy_run

FAKE_SMI = REPO / "tests" / "monitor" / "data"


@pytest.mark.slow
def test_monitor_summaries_are_report_columns(tmp_path: Path, dlbs: Any) -> None:
    result = dummy_run(tmp_path / "logs", "-P", "exp.gpus=0,1", "-P", "exp.num_batches=20",
                       "-P", "dummy.sleep=0.03", "-P", "dummy.busy=true",
                       "-P", "monitor.frequency=0.05",
                       env={"PATH": f"{FAKE_SMI}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 0, result.stderr
    columns = "time,use.gpu_util_mean,use.gpu_mem_max,use.gpu_power_mean,use.cpu_mean"
    report = dlbs("report", str(tmp_path / "logs" / "results.db"), "--columns", columns,
                  "--format", "json")
    assert report.returncode == 0, report.stderr
    [row] = json.loads(report.stdout)["rows"]
    assert row["use.gpu_util_mean"] == 89.0          # mean over the GPUs and the samples
    assert row["use.gpu_mem_max"] == 90103.0         # summed over the GPUs, the peak
    # Issue 23: the stored value exactly (JSON rounded it to 1010.44).
    assert row["use.gpu_power_mean"] == pytest.approx(1010.44, rel=1e-12)
    assert row["use.cpu_mean"] > 20.0                # a busy loop: most of a core
    text = dlbs("report", str(tmp_path / "logs" / "results.db"), "--columns", columns)
    header = next(line for line in text.stdout.splitlines() if line.startswith("model"))
    for title in ("GPU util mean (%)", "GPU memory peak (MiB)", "GPU power mean (W)",
                  "CPU mean (% of a core)"):
        assert title in header
