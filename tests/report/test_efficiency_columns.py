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


# -- the energy at the marks, by default (monitor.frequency 0) ---------------------------------
DEFAULTS = ("-P", "exp.num_batches=20", "-P", "dummy.sleep=0.05")


@pytest.mark.slow
@pytest.mark.parametrize("init_seconds,refused", [
    ("0", ""), ("1.5", ""),
    ("0", "nvmlDeviceGetUtilizationRates,nvmlDeviceGetMemoryInfo,nvmlDeviceGetPowerUsage")])
def test_every_gpu_row_has_its_energy_without_sampling(tmp_path: Path, dlbs: Any,
                                                        init_seconds: str, refused: str) -> None:
    # NVML's init delays the monitor's start after its attempt's (1.5 s: more than the reach
    # of a reading around a mark): the readings are placed on the attempt's clock.
    # The backend's warm-up outlasts the init, as a GPU's start does (a model built, cuDNN
    # tuned): its first mark comes once the counters are open. A driver that refuses the
    # levels (utilization, memory, power: a virtual machine's) still gives the counter, which
    # is all the marks read.
    env = {"PYTHONPATH": os.pathsep.join([str(FAKE_NVML), str(REPO)]),
           "FAKE_NVML_GPUS": "0:400,1:300", "FAKE_NVML_INIT_SECONDS": init_seconds,
           "FAKE_NVML_NOT_SUPPORTED": refused}
    warmup = ("-P", f"exp.num_warmup_batches={1 + int(float(init_seconds) / 0.05 * 1.5)}")
    result = dummy_run(tmp_path / "logs", "-P", "exp.gpus=0,1", *DEFAULTS, *warmup, env=env)
    assert result.returncode == 0, result.stderr
    with open_store(str(tmp_path / "logs" / "results.db"), create=False) as store:
        [attempt] = store.attempts()
    results = {**attempt.results, **attempt.summary}
    assert attempt.params["monitor.frequency"] == 0
    # Two readings, one at each mark; no series of levels, no summaries of them.
    assert len(results["results.use.time"]) == 2
    assert not [key for key in results if key.startswith("results.use.") and key not in (
        "results.use.time", "results.use.gpu_energy", "results.use.gpu0_energy",
        "results.use.gpu1_energy")]
    # The energy is the counters' over the marked interval, which holds the timed batches
    # and the loop's steps between them (a few ms; more on a loaded machine).
    timed = sum(results["results.time_data"]) / 1000.0
    interval = results["results.energy_interval_s"]
    assert timed <= interval + 0.005 and interval == pytest.approx(timed, rel=0.1)
    assert results["results.energy_source"] == "nvml counter"
    assert results["results.energy_j"] == pytest.approx(700.0 * interval, rel=0.02)
    assert results["results.power_avg_w"] == pytest.approx(700.0, rel=0.02)
    report = dlbs("report", str(tmp_path / "logs" / "results.db"), "--type", "efficiency",
                  "--format", "json")
    assert report.returncode == 0, report.stderr
    [row] = json.loads(report.stdout)["rows"]
    assert row["power_avg_w"] == pytest.approx(700.0, rel=0.02)


@pytest.mark.slow
def test_monitor_energy_false_reads_nothing(tmp_path: Path) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(FAKE_NVML), str(REPO)])}
    result = dummy_run(tmp_path / "logs", "-P", "exp.gpus=0", "-P", "monitor.energy=false",
                       *DEFAULTS, env=env)
    assert result.returncode == 0, result.stderr
    with open_store(str(tmp_path / "logs" / "results.db"), create=False) as store:
        [attempt] = store.attempts()
    assert not [key for key in {**attempt.results, **attempt.summary}
                if key.startswith(("results.use.", "results.energy"))]


@pytest.mark.slow
def test_a_cpu_row_says_why_it_has_no_energy_and_no_mfu(tmp_path: Path, dlbs: Any) -> None:
    result = dummy_run(tmp_path / "logs", *DEFAULTS)
    assert result.returncode == 0, result.stderr
    database = str(tmp_path / "logs" / "results.db")
    with open_store(database, create=False) as store:
        [attempt] = store.attempts()
    summary = attempt.summary
    assert summary["results.mfu_unavailable"].startswith("a CPU run: ")
    if os.access("/sys/class/powercap/intel-rapl:0/energy_uj", os.R_OK):
        assert summary["results.energy_source"] == "rapl counter"  # a machine that has it
        return
    reason = summary["results.energy_unavailable"]
    assert reason.startswith(("no RAPL counters: ", "RAPL counters not readable: "))
    note = ("energy per sample (J), samples per joule, average power (W): none in 1 row(s) "
            f"(resnet50, 16, 16): {reason}.")
    text = dlbs("report", database, "--type", "efficiency")
    assert text.returncode == 0, text.stderr
    assert note in " ".join(text.stdout.split())
    assert "MFU (of the dense peak): none in 1 row(s)" in text.stdout
    document = json.loads(dlbs("report", database, "--type", "efficiency", "--format",
                               "json").stdout)
    assert note in document["notes"]
    html = dlbs("report", database, "--type", "efficiency", "--format", "html",
                "-o", str(tmp_path / "e.html"))
    assert html.returncode == 0, html.stderr
    assert reason in (tmp_path / "e.html").read_text()
    plot = dlbs("plot", database, "--preset", "efficiency", "-o", str(tmp_path / "e.svg"))
    assert plot.returncode != 0 and "Traceback" not in plot.stderr
    assert f"no ok experiment has an average power: {reason} (1 experiment(s))" in plot.stderr
    assert "monitor.frequency > 0" not in plot.stderr
