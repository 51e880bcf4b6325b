"""Energy per sample end to end: a real sweep, the real monitor, the tests' own NVML.

The dummy backend runs on two "GPUs" and marks its timed interval; `dlbs run` samples them
through the stand-in pynvml of tests/monitor/data/fake_nvml (GPU 0 draws 400 W, GPU 1 300 W,
constantly, so the energy counters rise at 700 W together) put first on the PYTHONPATH as
`pynvml`, or through the stand-in nvidia-smi (no counter: 1010.44 W, integrated).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from dlbs.results.store import open_store
from tests.report.conftest import REPO, dummy_run

FAKE_NVML = REPO / "tests" / "monitor" / "data" / "fake_nvml"
FAKE_SMI = REPO / "tests" / "monitor" / "data"
COLUMNS = "throughput,energy_j,power_avg_w,energy_per_sample_j,samples_per_joule,energy_source"
SWEEP = ("-P", "exp.gpus=0,1", "-P", "exp.num_batches=20", "-P", "dummy.sleep=0.05",
         "-P", "monitor.frequency=0.25")


def run_and_report(tmp_path: Path, dlbs: Any, env: dict[str, str]) -> tuple[dict, dict]:
    result = dummy_run(tmp_path / "logs", *SWEEP, env=env)
    assert result.returncode == 0, result.stderr
    database = tmp_path / "logs" / "results.db"
    report = dlbs("report", str(database), "--columns", COLUMNS, "--format", "json")
    assert report.returncode == 0, report.stderr
    [row] = json.loads(report.stdout)["rows"]
    with open_store(str(database), create=False) as store:
        [attempt] = store.attempts()
    return row, {**attempt.results, **attempt.summary}


@pytest.mark.slow
def test_the_energy_counter_over_the_marked_interval(tmp_path: Path, dlbs: Any) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(FAKE_NVML), str(REPO)]),
           "FAKE_NVML_GPUS": "0:400,1:300"}
    row, results = run_and_report(tmp_path, dlbs, env)
    assert row["energy_source"] == "nvml counter"
    assert row["power_avg_w"] == pytest.approx(700.0, rel=0.01)
    assert row["energy_per_sample_j"] == pytest.approx(700.0 / row["throughput"], rel=0.02)
    assert results["results.samples_per_joule"] == pytest.approx(
        1.0 / results["results.energy_per_sample_j"])
    # The monitor sampled at both marks (4 Hz alone would leave up to 0.25 s to guess).
    times = results["results.use.time"]
    assert len(times) >= 4
    timed = sum(results["results.time_data"]) / 1000.0
    assert results["results.energy_j"] == pytest.approx(700.0 * timed, rel=0.02)
    assert results["results.energy_j.gpu0"] == pytest.approx(400.0 * timed, rel=0.02)
    assert results["results.use.gpu0_energy"][-1] > 0


@pytest.mark.slow
def test_without_nvml_the_sampled_power_is_integrated(tmp_path: Path, dlbs: Any) -> None:
    env = {"PATH": f"{FAKE_SMI}{os.pathsep}{os.environ['PATH']}",
           "FAKE_NVML_INIT_ERROR": "no driver",
           "PYTHONPATH": os.pathsep.join([str(FAKE_NVML), str(REPO)])}
    row, results = run_and_report(tmp_path, dlbs, env)
    assert row["energy_source"] == "power integral"
    assert row["power_avg_w"] == pytest.approx(1010.44, rel=1e-6)  # constant: exact
    assert results["results.use.energy_unavailable"] == "no GPU energy counter: NVML: no driver"
