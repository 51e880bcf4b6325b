"""The monitor's energy counters (NVML's, RAPL's) and its samples at the backend's marks.

No GPU and no readable RAPL exist here: NVML is the tests' own stand-in
(data/fake_nvml/pynvml.py: each GPU draws a constant power, so the energy of any interval is
known), RAPL a folder laid out as /sys/class/powercap is, with counters the test sets.
"""

from __future__ import annotations

import datetime
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlbs.monitor import ResourceMonitor
from dlbs.monitor.logmarks import LogMarks
from dlbs.monitor.rapl import open_rapl
from dlbs.monitor.sampling import ENERGY_UNAVAILABLE

DATA = Path(__file__).resolve().parent / "data"
FAKE_NVIDIA_SMI = str(DATA / "nvidia-smi")
SLEEPER = "import time; time.sleep(30)"
WATTS = {"0": 400.0, "1": 300.0}  # the fake's default


def sample(spawn, seconds: float = 0.5, frequency: float = 0.05, **options):
    process = spawn(SLEEPER)
    monitor = ResourceMonitor(frequency, **options)
    monitor.start(process.pid)
    time.sleep(seconds)
    return monitor.stop(), monitor


def test_nvml_gives_the_gpu_series_and_each_gpus_energy(spawn, fake_nvml, tmp_path):
    series, monitor = sample(spawn, gpus=["0", "1"], nvml=fake_nvml)
    assert set(series) == {"time", "cpu", "rss", "gpu_util", "gpu_mem", "gpu_power",
                           "gpu_energy", "gpu0_energy", "gpu1_energy"}
    count = len(series["time"])
    assert count >= 5 and monitor.warnings == []
    assert series["gpu_util"] == [90.5] * count           # mean of 90 and 91 %
    assert series["gpu_mem"] == [(10 + 11) * 1024.0] * count   # MiB, summed
    assert series["gpu_power"] == [700.0] * count          # W, summed
    # Counters: joules since the first reading, each GPU at its power, the sum of both.
    span = series["time"][-1] - series["time"][0]
    for gpu, watts in WATTS.items():
        energy = series[f"gpu{gpu}_energy"]
        assert energy[0] == pytest.approx(0.0, abs=watts * 0.02)
        assert energy[-1] - energy[0] == pytest.approx(watts * span, rel=0.1, abs=watts * 0.02)
        assert energy == sorted(energy)
    assert series["gpu_energy"] == [pytest.approx(a + b, abs=0.002) for a, b in
                                    zip(series["gpu0_energy"], series["gpu1_energy"])]
    assert (tmp_path / "nvml-calls").read_text().split() == ["init", "shutdown"]


def test_the_installed_binding_is_imported_by_name(spawn, fake_nvml, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml)  # what `import pynvml` then gives
    series, monitor = sample(spawn, seconds=0.3, gpus=["1"])
    assert series["gpu_power"][0] == 300.0 and "gpu_energy" in series
    assert "gpu1_energy" not in series  # one GPU: its own series is the sum
    assert monitor.warnings == []


def test_a_level_nvml_refuses_leaves_the_other_readings(spawn, fake_nvml, monkeypatch):
    # A virtual machine's driver may refuse utilization or memory: those series are NaN, said
    # once, and the power and the energy counter of the same samples are kept.
    monkeypatch.setenv("FAKE_NVML_NOT_SUPPORTED",
                       "nvmlDeviceGetUtilizationRates,nvmlDeviceGetMemoryInfo")
    series, monitor = sample(spawn, seconds=0.3, gpus=["0"], nvml=fake_nvml)
    assert "gpu_util" not in series and "gpu_mem" not in series   # no reading: no series
    assert series["gpu_power"][0] == 400.0 and series["gpu_energy"][-1] > 0
    assert monitor.warnings == ["GPU 0: NVML gives no utilization: Not Supported",
                                "GPU 0: NVML gives no memory: Not Supported"]


def test_a_gpu_without_an_energy_counter(spawn, fake_nvml, monkeypatch):
    monkeypatch.setenv("FAKE_NVML_NO_ENERGY", "1")
    series, monitor = sample(spawn, seconds=0.3, gpus=["0"], nvml=fake_nvml)
    assert "gpu_energy" not in series and series["gpu_power"][0] == 400.0
    assert series[ENERGY_UNAVAILABLE].startswith("no GPU energy counter: the GPUs report none")
    assert monitor.warnings == [
        "GPU 0 has no NVML energy counter: its energy is the integral of its power"]


def test_nvml_that_fails_to_start_leaves_nvidia_smi(spawn, fake_nvml, fake_smi_env,
                                                    monkeypatch):
    monkeypatch.setenv("FAKE_NVML_INIT_ERROR", "Driver Not Loaded")
    series, monitor = sample(spawn, seconds=0.3, gpus=["0"], nvml=fake_nvml,
                             nvidia_smi=FAKE_NVIDIA_SMI)
    assert series["gpu_util"][0] == 87.0  # nvidia-smi's canned answer
    assert series[ENERGY_UNAVAILABLE] == "no GPU energy counter: NVML: Driver Not Loaded"
    assert monitor.warnings == []


def test_a_gpu_nvml_does_not_know_leaves_nvidia_smi(spawn, fake_nvml, fake_smi_env):
    series, _ = sample(spawn, seconds=0.3, gpus=["0", "7"], nvml=fake_nvml,
                       nvidia_smi=FAKE_NVIDIA_SMI)
    assert series[ENERGY_UNAVAILABLE].startswith("no GPU energy counter: NVML has no GPU 7")


# -- the backend's marks ----------------------------------------------------------------------
MARKING = """
import datetime, sys, time
def mark(key):
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    print(f'[default0]:__results.{key}__="{now}"', flush=True)
time.sleep(float(sys.argv[1]))
mark('timed_start')
time.sleep(float(sys.argv[2]))
mark('timed_end')
"""


def run_marking(tmp_path: Path, before: float, timed: float, frequency: float = 5.0,
                **options):
    """A process that marks its timed interval in its log; the monitor follows the log.

    The monitor's own `frequency` is long enough to take no sample of its own in time.
    """
    log = tmp_path / "exp.log"
    log.write_text("__results.timed_start__=\"the header of an earlier attempt\"\n")
    with open(log, "ab") as out:
        process = subprocess.Popen([sys.executable, "-c", MARKING, str(before), str(timed)],
                                   stdout=out)
    monitor = ResourceMonitor(frequency, log=str(log), **options)
    monitor.start(process.pid)
    process.wait()
    return monitor


def test_a_sample_at_each_mark(tmp_path, fake_nvml):
    monitor = run_marking(tmp_path, 0.4, 0.5, gpus=["0"], nvml=fake_nvml)
    time.sleep(0.3)
    series = monitor.stop()
    # Two samples, each a poll (20 ms) after its mark, none for the earlier attempt's lines.
    assert len(series["time"]) == 2
    start, end = series["time"]
    assert end - start == pytest.approx(0.5, abs=0.1)
    energy = series["gpu_energy"]
    assert energy[1] - energy[0] == pytest.approx(400.0 * (end - start), rel=0.05)


def test_the_end_mark_is_sampled_after_the_process_ended(tmp_path, fake_nvml):
    # The process ends right after its end mark and the monitor is stopped at once: the
    # end still gets its sample (in stop(), if the thread had no time to see the mark).
    monitor = run_marking(tmp_path, 0.3, 0.2, gpus=["0"], nvml=fake_nvml)
    series = monitor.stop()
    assert len(series["time"]) == 2 and len(series["gpu_energy"]) == 2
    assert all(len(values) == 2 for values in series.values() if isinstance(values, list))


def test_log_marks_reads_only_what_is_appended(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b'__results.timed_start__="old"\n')
    marks = LogMarks(str(log))
    marks.start()
    assert marks.poll() == []
    with open(log, "ab") as out:
        out.write(b'noise\n0: __results.timed_sta')
        out.flush()
        assert marks.poll() == []  # half a line waits for its end
        out.write(b'rt__="t"\r__results.time__=1.0\n[1,0]<stdout>:__results.timed_end__="t"\n')
    assert marks.poll() == ["results.timed_start", "results.timed_end"]
    assert marks.poll() == []
    log.write_bytes(b'__results.timed_end__="rewritten"\n')  # shorter: read from the start
    assert marks.poll() == ["results.timed_end"]


def test_log_marks_of_a_log_that_is_not_there(tmp_path):
    marks = LogMarks(str(tmp_path / "missing" / "log"))
    marks.start()
    assert marks.poll() == []


# -- RAPL -------------------------------------------------------------------------------------
def powercap(root: Path, zones: dict) -> Path:
    """A /sys/class/powercap of `zones`: name -> (zone name, energy_uj, max range)."""
    for folder, (name, energy, wrap) in zones.items():
        (root / folder).mkdir(parents=True)
        (root / folder / "name").write_text(name + "\n")
        (root / folder / "energy_uj").write_text(f"{energy}\n")
        (root / folder / "max_energy_range_uj").write_text(f"{wrap}\n")
    return root


def set_energy(root: Path, folder: str, value: int) -> None:
    """A new counter value, replaced whole (the kernel's file is never seen half written)."""
    fresh = root / folder / "energy_uj.new"
    fresh.write_text(f"{value}\n")
    os.replace(fresh, root / folder / "energy_uj")


def test_rapl_sums_the_packages_and_counts_wraps(tmp_path):
    root = powercap(tmp_path / "powercap", {
        "intel-rapl:0": ("package-0", 5_000_000, 9_999_999),
        "intel-rapl:0:0": ("core", 1_000_000, 9_999_999),    # inside package 0: not added
        "intel-rapl:1": ("package-1", 2_000_000, 9_999_999),
        "intel-rapl:2": ("psys", 7_000_000, 9_999_999),      # the platform: holds the packages
    })
    counters, reason = open_rapl(str(root))
    assert reason is None and counters.read() == 0.0
    set_energy(root, "intel-rapl:0", 6_500_000)
    set_energy(root, "intel-rapl:0:0", 9_000_000)
    set_energy(root, "intel-rapl:2", 9_000_000)
    set_energy(root, "intel-rapl:1", 1_000_000)   # wrapped: 10,000,000 - 2,000,000 + 1,000,000
    assert counters.read() == pytest.approx(1.5 + 9.0)


@pytest.mark.parametrize("layout", ["missing", "no packages", "unreadable"])
def test_rapl_that_cannot_be_read_gives_a_reason(tmp_path, layout):
    root = tmp_path / "powercap"
    if layout == "no packages":
        powercap(root, {"intel-rapl:0": ("psys", 1, 9)})
    elif layout == "unreadable":
        powercap(root, {"intel-rapl:0": ("package-0", 1, 9)})
        (root / "intel-rapl:0" / "energy_uj").unlink()
        (root / "intel-rapl:0" / "energy_uj").mkdir()  # what no permission does to a read
    counters, reason = open_rapl(str(root))
    assert counters is None
    assert {"missing": "no RAPL counters: ", "no packages": "no RAPL package counters in ",
            "unreadable": "RAPL counters not readable: "}[layout] in reason


def test_a_cpu_run_reads_rapl(spawn, tmp_path):
    root = powercap(tmp_path / "powercap", {"intel-rapl:0": ("package-0", 0, 10**12)})
    process = spawn(SLEEPER)
    monitor = ResourceMonitor(0.05, rapl_root=str(root))
    monitor.start(process.pid)
    for step in range(1, 6):
        time.sleep(0.1)
        set_energy(root, "intel-rapl:0", step * 10_000_000)  # 10 J every 0.1 s
    time.sleep(0.15)
    series = monitor.stop()
    assert "cpu_energy" in series and monitor.warnings == []
    assert series["cpu_energy"] == sorted(series["cpu_energy"])
    assert series["cpu_energy"][-1] == pytest.approx(50.0)


def test_no_rapl_is_a_reason_not_an_error(spawn, tmp_path):
    series, monitor = sample(spawn, seconds=0.2, rapl_root=str(tmp_path / "no-powercap"))
    assert "cpu_energy" not in series and len(series["time"]) >= 2
    assert series[ENERGY_UNAVAILABLE].startswith("no RAPL counters: ")
    assert monitor.warnings == []
    assert all(not math.isnan(value) for value in series["cpu"])


def test_mark_times_are_utc_iso():
    # What the backends print (benchmark_common/timed_marks.py) reads back as an instant.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    from benchmark_common.timed_marks import TimedMarks

    printed = []
    TimedMarks(lambda key, value: printed.append((key, value))).start()
    TimedMarks(lambda key, value: printed.append((key, value)), enabled=False).end()
    [(key, value)] = printed
    assert key == "results.timed_start"
    moment = datetime.datetime.fromisoformat(value)
    assert moment.tzinfo is not None and len(value.split(".")[1]) >= 6


# -- the energy at the marks only (frequency 0: what `dlbs run` does by default) ---------------
def test_at_the_marks_only_the_counters_are_read(tmp_path, fake_nvml):
    monitor = run_marking(tmp_path, 0.3, 0.5, frequency=0, gpus=["0", "1"], nvml=fake_nvml)
    series = monitor.stop()
    assert set(series) == {"time", "gpu_energy", "gpu0_energy", "gpu1_energy"}
    start, end = series["time"]
    assert end - start == pytest.approx(0.5, abs=0.1)
    assert series["gpu_energy"][1] == pytest.approx(700.0 * (end - start), rel=0.05)
    assert monitor.warnings == [] and monitor.samples_taken == 2


def test_at_the_marks_only_without_nvml_there_is_nothing_to_read(tmp_path, fake_nvml,
                                                                 monkeypatch):
    monkeypatch.setenv("FAKE_NVML_INIT_ERROR", "Driver Not Loaded")
    monitor = run_marking(tmp_path, 0.1, 0.1, frequency=0, gpus=["0"], nvml=fake_nvml,
                          nvidia_smi=FAKE_NVIDIA_SMI)
    assert monitor.stop() == {"time": [], ENERGY_UNAVAILABLE:
                              "no GPU energy counter: NVML: Driver Not Loaded"}
    assert monitor.samples_taken == 0  # nvidia-smi (no counter) is never asked


def test_at_the_marks_only_a_backend_that_marks_nothing(spawn, tmp_path, fake_nvml):
    log = tmp_path / "exp.log"
    log.write_text("")
    process = spawn(SLEEPER)
    monitor = ResourceMonitor(0, gpus=["0"], nvml=fake_nvml, log=str(log))
    monitor.start(process.pid)
    time.sleep(0.2)
    assert monitor.stop() == {"time": [], ENERGY_UNAVAILABLE: (
        "no reading of the energy counters: the backend marked no timed interval "
        "(results.timed_start, results.timed_end)")}


def test_at_the_marks_only_needs_the_log():
    with pytest.raises(ValueError, match="frequency .* needs the log"):
        ResourceMonitor(0, gpus=["0"])


def test_at_the_marks_only_rapl_is_read_between_them_to_count_its_wraps(tmp_path,
                                                                        monkeypatch):
    from dlbs.monitor import sampling

    monkeypatch.setattr(sampling, "RAPL_KEEP_S", 0.05)
    root = powercap(tmp_path / "powercap", {"intel-rapl:0": ("package-0", 0, 999_999_999)})
    log = tmp_path / "exp.log"
    log.write_text("")
    marker = ('import datetime, sys, time; m = lambda k: print(f\'__results.{k}__="\' + '
              'datetime.datetime.now(datetime.timezone.utc).isoformat() + \'"\', flush=True); '
              'm("timed_start"); sys.stdin.readline(); m("timed_end"); time.sleep(0.3)')
    with open(log, "ab") as out:
        process = subprocess.Popen([sys.executable, "-c", marker], stdout=out,
                                   stdin=subprocess.PIPE)
    monitor = ResourceMonitor(0, rapl_root=str(root), log=str(log))
    monitor.start(process.pid)
    time.sleep(0.3)
    set_energy(root, "intel-rapl:0", 990_000_000)     # 990 J of a 1000 J range ...
    time.sleep(0.3)
    set_energy(root, "intel-rapl:0", 5_000_000)       # ... and 15 J more, across the wrap
    time.sleep(0.3)
    process.communicate(b"\n")
    series = monitor.stop()
    assert series["cpu_energy"][-1] - series["cpu_energy"][0] == pytest.approx(1005.0)
    assert set(series) == {"time", "cpu_energy"} and len(series["time"]) == 2
