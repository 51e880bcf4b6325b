"""GPU series from nvidia-smi.

No GPU exists here: a fake nvidia-smi prints canned answers (data/*.csv) to exactly the
monitor's query, and fails or hangs on request. NVML is switched off (`nvml=None`), so
that these run the same on a machine with GPUs (test_monitor_energy.py fakes NVML).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

from dlbs.monitor import ResourceMonitor
from dlbs.monitor.gpu import parse_query_output
from dlbs.monitor.monitor import MAX_GPU_FAILURES
from dlbs.monitor.sampling import ENERGY_UNAVAILABLE

DATA = Path(__file__).resolve().parent / "data"
FAKE_NVIDIA_SMI = str(DATA / "nvidia-smi")

# data/two_gpus.csv, made up in the format of the real capture data/h200x2_idle.csv:
# GPU 0 at 87 %, 45123 MiB, 512.34 W; GPU 1 at 91 %, 44980 MiB, 498.10 W.
GPU0 = (87.0, 45123.0, 512.34)
GPU1 = (91.0, 44980.0, 498.10)
SLEEPER = "import time; time.sleep(30)"


def monitored(spawn, seconds: float = 0.5, **options) -> tuple[dict, ResourceMonitor]:
    """Monitor a sleeping process for `seconds` at 0.05 s; return the series and monitor."""
    process = spawn(SLEEPER)
    options = {"nvml": None, "rapl_root": None, **options}
    monitor = ResourceMonitor(options.pop("frequency", 0.05), **options)
    monitor.start(process.pid)
    time.sleep(seconds)
    return monitor.stop(), monitor


def calls(log) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize(
    ("gpus", "util", "mem", "power"),
    [
        pytest.param(["0", "1"], (GPU0[0] + GPU1[0]) / 2, GPU0[1] + GPU1[1], GPU0[2] + GPU1[2],
                     id="two GPUs: mean utilization, summed memory and power"),
        pytest.param(["1"], *GPU1, id="GPU 1 only"),
        pytest.param([" 0 "], *GPU0, id="ids are trimmed"),
        pytest.param("0:1", (GPU0[0] + GPU1[0]) / 2, GPU0[1] + GPU1[1], GPU0[2] + GPU1[2],
                     id="exp.gpus as a string"),
    ],
)
def test_gpu_series_of_the_selected_gpus(spawn, fake_smi_env, gpus, util, mem, power):
    series, monitor = monitored(spawn, gpus=gpus, nvidia_smi=FAKE_NVIDIA_SMI)
    assert set(series) == {"time", "cpu", "rss", "gpu_util", "gpu_mem", "gpu_power",
                           ENERGY_UNAVAILABLE}
    # nvidia-smi has no energy counter: the summaries integrate the power instead.
    assert series[ENERGY_UNAVAILABLE] == "no GPU energy counter: NVML is not used"
    count = len(series["time"])
    assert count >= 5
    assert series["gpu_util"] == [pytest.approx(util)] * count
    assert series["gpu_mem"] == [pytest.approx(mem)] * count
    assert series["gpu_power"] == [pytest.approx(power)] * count
    assert monitor.warnings == []
    # One query per sample (and one more if stop() cut a query short).
    assert count <= len(calls(fake_smi_env)) <= count + 1


def test_a_real_capture(spawn, fake_smi_env, monkeypatch):
    # nvidia-smi's answer on 2x H200 (driver 580.159.04), idle: no memory used, power drawn.
    monkeypatch.setenv("FAKE_NVIDIA_SMI_OUTPUT", str(DATA / "h200x2_idle.csv"))
    series, monitor = monitored(spawn, seconds=0.3, gpus=["0", "1"],
                                nvidia_smi=FAKE_NVIDIA_SMI)
    assert set(series["gpu_util"]) == {0.0} and set(series["gpu_mem"]) == {0.0}
    assert series["gpu_power"] == [pytest.approx(117.71 + 122.87)] * len(series["time"])
    assert monitor.warnings == []


def test_no_gpus_means_no_query(spawn, fake_smi_env):
    series, monitor = monitored(spawn, gpus=[], nvidia_smi=FAKE_NVIDIA_SMI)
    assert set(series) == {"time", "cpu", "rss"}
    assert calls(fake_smi_env) == [] and monitor.warnings == []


def test_missing_nvidia_smi_gives_no_gpu_series_and_a_warning(spawn, tmp_path):
    series, monitor = monitored(spawn, gpus=["0"], nvidia_smi=str(tmp_path / "nvidia-smi"))
    assert set(series) == {"time", "cpu", "rss", ENERGY_UNAVAILABLE}
    assert len(series["time"]) >= 5
    assert len(monitor.warnings) == 1 and "not found" in monitor.warnings[0]


def test_missing_nvidia_smi_on_the_path(spawn, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    series, monitor = monitored(spawn, seconds=0.2, gpus=["0"])
    assert "gpu_util" not in series
    assert "nvidia-smi not found" in monitor.warnings[0]


def test_failing_nvidia_smi_is_given_up_after_a_few_tries(spawn, fake_smi_env, monkeypatch):
    monkeypatch.setenv("FAKE_NVIDIA_SMI_EXIT", "9")
    series, monitor = monitored(spawn, gpus=["0"], nvidia_smi=FAKE_NVIDIA_SMI)
    assert set(series) == {"time", "cpu", "rss", ENERGY_UNAVAILABLE}
    assert len(series["time"]) >= 5
    assert len(calls(fake_smi_env)) == MAX_GPU_FAILURES
    failure = monitor.warnings[0]
    assert "exited with status 9" in failure and "couldn't communicate" in failure
    assert any("no longer queried" in w for w in monitor.warnings)


def test_a_gpu_nvidia_smi_does_not_list(spawn, fake_smi_env):
    series, monitor = monitored(spawn, seconds=0.2, gpus=["7"], nvidia_smi=FAKE_NVIDIA_SMI)
    assert "gpu_util" not in series
    assert "does not list GPU 7 (it lists: 0, 1)" in monitor.warnings[0]


def test_one_of_two_gpus_missing(spawn, fake_smi_env):
    series, monitor = monitored(spawn, gpus=["0", "5"], nvidia_smi=FAKE_NVIDIA_SMI)
    assert series["gpu_mem"][0] == pytest.approx(GPU0[1])
    assert monitor.warnings == ["nvidia-smi does not list GPU 5"]


def test_no_power_reading(spawn, fake_smi_env, monkeypatch):
    monkeypatch.setenv("FAKE_NVIDIA_SMI_OUTPUT", str(DATA / "na_power.csv"))
    series, monitor = monitored(spawn, gpus=["0", "1"], nvidia_smi=FAKE_NVIDIA_SMI)
    assert "gpu_power" not in series
    assert series["gpu_util"][0] == pytest.approx(89.0)
    assert monitor.warnings == ["no gpu_power series: nvidia-smi reported no power draw"]


def test_lines_that_are_not_readings_are_skipped(spawn, fake_smi_env, monkeypatch):
    monkeypatch.setenv("FAKE_NVIDIA_SMI_OUTPUT", str(DATA / "malformed.csv"))
    series, monitor = monitored(spawn, gpus=["0", "1"], nvidia_smi=FAKE_NVIDIA_SMI)
    assert series["gpu_power"][0] == pytest.approx(GPU0[2] + GPU1[2])
    assert monitor.warnings == [
        "unexpected nvidia-smi output line 'Failed to initialize NVML: Unknown Error'"
    ]


def test_a_failure_midway_leaves_a_gap(spawn, fake_smi_env, monkeypatch):
    process = spawn(SLEEPER)
    monitor = ResourceMonitor(0.05, gpus=["0"], nvidia_smi=FAKE_NVIDIA_SMI, nvml=None)
    monitor.start(process.pid)
    time.sleep(0.3)
    monkeypatch.setenv("FAKE_NVIDIA_SMI_EXIT", "3")  # the next queries fail...
    while not any("status 3" in w for w in monitor.warnings):
        time.sleep(0.01)
    monkeypatch.delenv("FAKE_NVIDIA_SMI_EXIT")  # ...then it recovers
    time.sleep(0.3)
    series = monitor.stop()
    util = series["gpu_util"]
    assert len(util) == len(series["time"]) == len(series["gpu_power"])
    gap = [i for i, value in enumerate(util) if math.isnan(value)]
    assert gap and 0 < gap[0] and gap[-1] < len(util) - 1
    assert all(value == pytest.approx(GPU0[0]) for value in util if not math.isnan(value))
    assert not any("no longer queried" in w for w in monitor.warnings)


def _live_processes_of_session(session: int) -> list[int]:
    """Pids of processes still running in session `session` (zombies do not count)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except (OSError, ValueError):
            continue
        if int(fields[3]) == session and fields[0] not in (b"Z", b"X"):
            found.append(int(name))
    return found


def test_a_hung_nvidia_smi_does_not_delay_stop(spawn, fake_smi_env, monkeypatch):
    monkeypatch.setenv("FAKE_NVIDIA_SMI_SLEEP", "30")
    process = spawn(SLEEPER)
    monitor = ResourceMonitor(0.2, gpus=["0"], nvidia_smi=FAKE_NVIDIA_SMI, nvml=None)
    monitor.start(process.pid)
    time.sleep(0.5)
    began = time.monotonic()
    series = monitor.stop()
    assert time.monotonic() - began < 0.2 + 0.5
    # The sample in flight was dropped whole.
    assert set(series) == {"time", "cpu", "rss", ENERGY_UNAVAILABLE}
    assert series["time"] == []
    # The query's process group (the fake and its `sleep`) was killed, not left behind.
    fake_pid = _fake_pids(fake_smi_env)
    time.sleep(0.1)
    assert fake_pid and _live_processes_of_session(fake_pid[0]) == []


def _fake_pids(log) -> list[int]:
    """Each query runs in a session of its own, whose id is the fake's pid."""
    return [int(line.split()[1]) for line in calls(log)]


def test_a_slow_nvidia_smi_times_out(spawn, fake_smi_env, monkeypatch):
    monkeypatch.setenv("FAKE_NVIDIA_SMI_SLEEP", "5")
    series, monitor = monitored(spawn, seconds=1.2, gpus=["0"], nvidia_smi=FAKE_NVIDIA_SMI,
                                query_timeout=0.2)
    assert "gpu_util" not in series
    assert "gave no answer within 0.2 s" in monitor.warnings[0]
    assert len(_fake_pids(fake_smi_env)) == MAX_GPU_FAILURES
    for pid in _fake_pids(fake_smi_env):
        assert _live_processes_of_session(pid) == []


@pytest.mark.parametrize(
    ("text", "readings", "problems"),
    [
        ("0, 87, 45123, 512.34\n", [("0", 87.0, 45123.0, 512.34)], 0),
        ("0, [Not Supported], 10, [N/A]\n", [("0", math.nan, 10.0, math.nan)], 0),
        ("\n\n1, 1, 1, 1\n", [("1", 1.0, 1.0, 1.0)], 0),
        ("0, 1, 2\n", [], 1),
        ("GPU-abc, 1, 2, 3\n", [], 1),
        ("", [], 0),
    ],
)
def test_parse_query_output(text, readings, problems):
    parsed, found_problems = parse_query_output(text)
    assert len(found_problems) == problems
    assert len(parsed) == len(readings)
    for reading, expected in zip(parsed, readings):
        got = (reading.index, reading.utilization, reading.memory_used, reading.power_draw)
        assert all(a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))
                   for a, b in zip(got, expected))
