"""The monitor's sources misbehaving: NVML hung or raising, counters that go back.

NVML may never return or raise what it should not; counters go back (a RAPL reset, an NVML
counter after a driver reload).

NVML is the tests' stand-in (data/fake_nvml/pynvml.py), made to hang in a named call or to
raise a built-in exception instead of its NVMLError; RAPL is a powercap folder whose counters
the test sets. Whatever the source does, `stop()` returns within its bound, nothing raises,
and no energy is negative: what could not be measured is a warning or a gap.
"""

from __future__ import annotations

import datetime
import threading
import time

import pytest

from dlbs.monitor import ResourceMonitor
from dlbs.monitor.bounded import BoundedWorker, CallCancelled, CallTimedOut
from dlbs.monitor.nvml import open_nvml
from dlbs.monitor.rapl import open_rapl
from dlbs.monitor.sampling import ENERGY_GAPS, MAX_GPU_FAILURES, STOP_LIMIT
from dlbs.results import energy
from tests.monitor.test_monitor_energy import SLEEPER, powercap, run_marking, set_energy

ENERGY_READ = "nvmlDeviceGetTotalEnergyConsumption"


def _stopped_within(monitor: ResourceMonitor, limit: float) -> dict:
    began = time.monotonic()
    series = monitor.stop()
    assert time.monotonic() - began < limit
    return series


# -- the bounded worker -------------------------------------------------------------------
def test_a_call_that_never_returns_times_out_and_the_next_fails_at_once():
    worker = BoundedWorker("test")
    never = threading.Event()
    began = time.monotonic()
    with pytest.raises(CallTimedOut, match="the wait gave no answer within 0.2 s"):
        worker.call(never.wait, timeout=0.2, what="the wait")
    assert 0.2 <= time.monotonic() - began < 1.0
    began = time.monotonic()
    with pytest.raises(CallTimedOut, match=r"the wait gave no answer within 0.2 s \(for "):
        worker.call(lambda: 1, timeout=5.0)   # behind the hung one: said at once
    assert time.monotonic() - began < 0.1
    never.set()                               # the hung call returns after all ...
    time.sleep(0.1)
    assert worker.hung is None
    assert worker.call(lambda: 2, timeout=1.0) == 2  # ... and the worker serves again
    worker.close()


def test_a_call_waited_for_is_cancelled_by_the_stop():
    worker = BoundedWorker("test")
    stop = threading.Event()
    threading.Timer(0.1, stop.set).start()
    began = time.monotonic()
    with pytest.raises(CallCancelled):
        worker.call(time.sleep, 3.0, timeout=10.0, stop=stop)
    assert time.monotonic() - began < 0.5


def test_a_call_hands_back_any_exception_and_value():
    worker = BoundedWorker("test")
    assert worker.call(divmod, 7, 2, timeout=1.0) == (3, 1)
    with pytest.raises(ZeroDivisionError):
        worker.call(divmod, 1, 0, timeout=1.0)
    with pytest.raises(RuntimeError, match="SystemExit"):
        worker.call(exit, 3, timeout=1.0)
    worker.close()


# -- NVML that hangs ----------------------------------------------------------------------
@pytest.mark.parametrize("hung", ["nvmlInit", "nvmlDeviceGetHandleByIndex"])
def test_nvml_that_hangs_while_starting_is_given_up(fake_nvml, monkeypatch, hung):
    monkeypatch.setenv("FAKE_NVML_HANG", hung)
    began = time.monotonic()
    gpus, reason = open_nvml(("0",), fake_nvml, timeout=0.3)
    assert gpus is None and reason == "NVML: nvmlInit gave no answer within 0.3 s"
    assert time.monotonic() - began < 1.0


@pytest.mark.parametrize("hung", [ENERGY_READ, "nvmlDeviceGetUtilizationRates",
                                  "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPowerUsage"])
def test_a_reading_that_never_returns_never_holds_up_the_stop(spawn, fake_nvml,
                                                              monkeypatch, hung):
    process = spawn(SLEEPER)
    monitor = ResourceMonitor(0.05, gpus=["0", "1"], nvml=fake_nvml, query_timeout=0.3)
    monitor.start(process.pid)
    time.sleep(0.3)
    monkeypatch.setenv("FAKE_NVML_HANG", hung)   # the driver gets into trouble now
    time.sleep(0.8)
    series = _stopped_within(monitor, 0.5)
    assert "gpu_energy" in series and len(series["time"]) == len(series["gpu_power"])
    assert "GPU query failed: NVML: a reading gave no answer within 0.3 s" in monitor.warnings
    # The samples after it failed at once: the sampling went on at its pace, GPUs NaN.
    assert len(series["time"]) >= 10
    assert any(value != value for value in series["gpu_power"])  # NaN: no reading


def test_a_hung_read_at_the_last_mark_is_bounded(tmp_path, fake_nvml, monkeypatch):
    # The monitor is stopped right after the end mark, which only the stop's last look
    # sees: that read hangs, and the stop still returns within its bound.
    monitor = run_marking(tmp_path, 0.3, 0.2, gpus=["0"], nvml=fake_nvml)
    monkeypatch.setenv("FAKE_NVML_HANG", ENERGY_READ)
    series = _stopped_within(monitor, STOP_LIMIT + 0.3)
    assert len(series["time"]) in (1, 2)


def test_a_hung_shutdown_does_not_hold_up_the_stop(spawn, fake_nvml, monkeypatch):
    monkeypatch.setenv("FAKE_NVML_HANG", "nvmlShutdown")
    process = spawn(SLEEPER)
    monitor = ResourceMonitor(0.05, gpus=["0"], nvml=fake_nvml)
    monitor.start(process.pid)
    time.sleep(0.2)
    series = _stopped_within(monitor, 1.0)
    assert "gpu_energy" in series


# -- NVML that raises what it should not --------------------------------------------------
@pytest.mark.parametrize("exception", ["TypeError", "AttributeError", "UnicodeDecodeError",
                                       "OSError", "KeyError"])
def test_an_exception_that_is_not_nvmls_is_a_warning(spawn, fake_nvml, monkeypatch,
                                                     exception):
    process = spawn(SLEEPER)
    monitor = ResourceMonitor(0.05, gpus=["0"], nvml=fake_nvml)
    monitor.start(process.pid)
    time.sleep(0.2)
    # UnicodeDecodeError takes five arguments: built from one it is a TypeError, also fine.
    monkeypatch.setenv("FAKE_NVML_RAISE", f"nvmlDeviceGetPowerUsage:{exception}")
    time.sleep(0.3)
    after = time.monotonic() - monitor.started_at
    time.sleep(0.3)
    series = monitor.stop()
    assert any(w.startswith("GPU query failed: NVML failed: GPU 0: ") for w in monitor.warnings)
    assert f"GPUs no longer queried after {MAX_GPU_FAILURES} failures in a row" in \
        monitor.warnings
    # The thread went on: samples after the trouble, their GPU values NaN.
    assert series["gpu_power"][0] == 400.0
    assert sum(t > after for t in series["time"]) >= 3
    assert series["gpu_power"][-1] != series["gpu_power"][-1]


def test_an_exception_while_starting_nvml_leaves_nvidia_smi(fake_nvml, monkeypatch):
    monkeypatch.setenv("FAKE_NVML_RAISE", "nvmlInit:AttributeError")
    gpus, reason = open_nvml(("0",), fake_nvml)
    assert gpus is None and reason == "NVML: nvmlInit broke"


def test_a_failure_inside_the_sampling_thread_ends_it_with_its_reason(spawn, monkeypatch):
    from dlbs.monitor import sampling

    process = spawn(SLEEPER)
    monitor = ResourceMonitor(0.05, rapl_root=None)
    monitor.start(process.pid)
    time.sleep(0.2)

    def broken(*args, **kwargs):
        raise MemoryError("no room")

    monkeypatch.setattr(sampling.proc, "scan_processes", broken)
    time.sleep(0.2)
    series = _stopped_within(monitor, 0.5)
    assert "the monitor stopped sampling: MemoryError: no room" in monitor.warnings
    assert len(series["time"]) == len(series["cpu"]) >= 2


# -- counters that go back ----------------------------------------------------------------
def test_a_rapl_reset_is_not_a_wrap(tmp_path):
    range_uj = 262_143_999_999  # a real package's max_energy_range_uj (262 kJ)
    root = powercap(tmp_path / "powercap", {"intel-rapl:0": ("package-0", 200_000_000_000,
                                                             range_uj)})
    counters, _ = open_rapl(str(root))
    set_energy(root, "intel-rapl:0", 201_000_000_000)    # +1 kJ: fine in a second
    assert counters.read() == pytest.approx(1_000.0)
    set_energy(root, "intel-rapl:0", 1_000_000)          # back to near 0: a reset
    assert counters.read() == pytest.approx(1_000.0)     # not +62 kJ "across a wrap"
    assert counters.resets == ["intel-rapl:0 (from 201000000000 to 1000000 uJ)"]
    counters.resets.clear()
    set_energy(root, "intel-rapl:0", 3_000_000)
    assert counters.read() == pytest.approx(1_002.0)     # counting again from there


@pytest.mark.parametrize(("last", "now", "reset"), [
    (262_143_000_000, 500_000, False),     # 1.5 J across the wrap: a wrap
    (261_500_000_000, 100_000_000, False),  # 744 J across the wrap: within 1 kW for 1 s
    (250_000_000_000, 500_000, True),      # 12 kJ "across the wrap" in no time: a reset
    (131_000_000_000, 130_000_000_000, True),  # back by 1 kJ: a reset (a wrap is 261 kJ)
])
def test_a_wrap_is_what_fits_in_the_time_since_the_last_read(tmp_path, last, now, reset):
    root = powercap(tmp_path / "powercap", {"intel-rapl:0": ("package-0", last,
                                                             262_143_999_999)})
    counters, _ = open_rapl(str(root))
    set_energy(root, "intel-rapl:0", now)
    joules = counters.read()
    assert bool(counters.resets) == reset
    assert joules == (0.0 if reset else pytest.approx((262_144_000_000 - last + now) / 1e6))


def test_a_rapl_reset_in_the_series_is_a_gap(spawn, tmp_path):
    root = powercap(tmp_path / "powercap", {"intel-rapl:0": ("package-0", 100_000_000_000,
                                                             262_143_999_999)})
    process = spawn(SLEEPER)
    monitor = ResourceMonitor(0.05, rapl_root=str(root))
    monitor.start(process.pid)
    time.sleep(0.2)
    set_energy(root, "intel-rapl:0", 100_050_000_000)   # +50 J ... then a reset
    time.sleep(0.2)
    set_energy(root, "intel-rapl:0", 1_000)
    time.sleep(0.2)
    series = monitor.stop()
    values = series["cpu_energy"]
    assert values == sorted(values) and values[-1] == pytest.approx(50.0)
    [gap] = series[ENERGY_GAPS]
    assert gap["counter"] == "RAPL counter intel-rapl:0 (from 100050000000 to 1000 uJ)"
    assert gap["what"] == "was reset" and 0 < gap["sample"] < len(values)
    assert any(w.startswith("the RAPL counter intel-rapl:0 ") for w in monitor.warnings)


def test_an_nvml_counter_going_back_is_a_gap_never_negative(spawn, fake_nvml,
                                                             monkeypatch):
    process = spawn(SLEEPER)
    monitor = ResourceMonitor(0.05, gpus=["0", "1"], nvml=fake_nvml)
    monitor.start(process.pid)
    time.sleep(0.3)
    monkeypatch.setenv("FAKE_NVML_ENERGY_OFFSET", str(-5e6))  # back by 5 kJ each
    time.sleep(0.3)
    series = monitor.stop()
    for name in ("gpu_energy", "gpu0_energy", "gpu1_energy"):
        assert series[name] == sorted(series[name]) and series[name][0] >= 0
    gaps = series[ENERGY_GAPS]
    assert [g["counter"] for g in gaps] == ["NVML energy counter of GPU 0",
                                           "NVML energy counter of GPU 1"]
    assert all(g["what"].startswith("went back by 4") for g in gaps)  # 5 kJ less 0.x s
    # The timed interval across the gap is unusable; one beside it is measured.
    times = series["time"]
    at = gaps[0]["sample"]
    across = summarized(series, times[at - 2], times[at + 1])
    assert "results.energy_j" not in across
    reason = across["results.energy_unavailable"]
    assert reason.startswith("the NVML energy counter of GPU 0 went back by ")
    assert reason.endswith(f"inside the timed interval ({times[at - 2] + 0.0:.6g} to "
                           f"{times[at + 1] + 0.0:.6g} s): its energy is unknown")
    # (A millisecond inside the samples: the marks are read back to the microsecond.)
    before = summarized(series, times[0], times[at - 1] - 0.001)
    assert before["results.energy_j"] == pytest.approx(700.0 * (times[at - 1] - times[0]),
                                                       rel=0.1)
    after = summarized(series, times[at] + 0.001, times[-1])
    assert after["results.energy_j"] == pytest.approx(700.0 * (times[-1] - times[at]), rel=0.1)


def summarized(series: dict, start: float, end: float) -> dict:
    """The energy keys of an attempt with these series, marked from `start` to `end`."""
    zero = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    results = {f"results.use.{key}": value for key, value in series.items()}
    results["results.timed_start"] = (zero + datetime.timedelta(seconds=start)).isoformat()
    results["results.timed_end"] = (zero + datetime.timedelta(seconds=end)).isoformat()
    return energy.summarize(results, zero.isoformat(), 100.0)


@pytest.mark.parametrize("gaps", [
    "text", [None], [{"sample": "3"}], [{"sample": True}], [{"sample": -1}], [{}],
])
def test_gaps_a_row_holds_that_are_not_gaps_are_ignored(gaps):
    assert energy.gap_inside(gaps, [0.0, 1.0, 2.0], 0.5, 1.5) is None


def test_a_counter_lower_at_the_end_of_the_interval_is_unusable():
    # A row written by an older monitor (or by hand): no gaps listed, the counter lower.
    found = summarized({"time": [0.0, 1.0, 2.0], "gpu_energy": [0.0, 100.0, 40.0]}, 0.5, 2.0)
    assert found == {"results.energy_unavailable": "the nvml counter went back over the timed "
                                                   "interval (50 J, then 40 J): the interval "
                                                   "is unusable"}
