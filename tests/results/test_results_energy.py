"""The energy of the timed interval (dlbs/results/energy.py) and the derived MFU and memory.

Counters and power series made up so that each number can be worked out by hand; the end to
end path (a real run sampled through the tests' stand-in NVML) is
tests/report/test_efficiency_columns.py.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlbs.results import efficiency, energy, summary, usage

STARTED = "2026-01-01T10:00:00+00:00"


def at(seconds: float) -> str:
    """The ISO time `seconds` after STARTED, as a backend's mark prints it."""
    whole = int(seconds)
    return f"2026-01-01T10:00:{whole:02d}.{round((seconds - whole) * 1e6):06d}+00:00"


def gpu_run(watts: float = 500.0, idle: float = 100.0) -> dict:
    """Samples every 0.5 s for 10 s on one GPU: idle up to 2 s, `watts` from then on.

    The counter rises at the power drawn, so the energy from 3 s to 8 s is 5 s x `watts`.
    """
    times = [0.5 * i for i in range(1, 21)]
    power = [idle if t <= 2.0 else watts for t in times]
    counter, joules, last = [], 0.0, 0.0
    for t, p in zip(times, power):
        joules += p * (t - last)
        counter.append(joules)
        last = t
    return {"results.use.time": times, "results.use.gpu_power": power,
            "results.use.gpu_energy": counter, "results.timed_start": at(3.0),
            "results.timed_end": at(8.0), "results.time_data": [500.0] * 10}


def test_the_counter_over_the_marked_interval() -> None:
    keys = energy.summarize(gpu_run(), STARTED, throughput=200.0)
    assert keys["results.energy_source"] == "nvml counter"
    assert keys["results.energy_j"] == pytest.approx(2500.0)
    assert keys["results.energy_interval_s"] == pytest.approx(5.0)
    assert keys["results.power_avg_w"] == pytest.approx(500.0)
    # 200 samples/s for 5 s: 1000 samples for 2500 J.
    assert keys["results.energy_per_sample_j"] == pytest.approx(2.5)
    assert keys["results.samples_per_joule"] == pytest.approx(0.4)
    assert "results.energy_warnings" not in keys


def test_a_mark_between_samples_reads_the_counter_linearly() -> None:
    results = gpu_run()
    results["results.timed_start"], results["results.timed_end"] = at(3.25), at(7.6)
    keys = energy.summarize(results, STARTED, throughput=None)
    assert keys["results.energy_j"] == pytest.approx(500.0 * 4.35)
    assert "results.energy_per_sample_j" not in keys  # no throughput, no per-sample keys


def test_without_a_counter_the_power_is_integrated() -> None:
    results = gpu_run()
    del results["results.use.gpu_energy"]
    results["results.use.energy_unavailable"] = "no GPU energy counter: NVML: Not Found"
    keys = energy.summarize(results, STARTED, throughput=200.0)
    assert keys["results.energy_source"] == "power integral"
    assert keys["results.energy_j"] == pytest.approx(2500.0)


def test_a_counter_and_the_power_that_disagree_carry_a_warning() -> None:
    results = gpu_run()
    results["results.use.gpu_power"] = [p / 2 for p in results["results.use.gpu_power"]]
    keys = energy.summarize(results, STARTED, throughput=200.0)
    assert keys["results.energy_j"] == pytest.approx(2500.0)  # the counter is the number
    [warning] = keys["results.energy_warnings"]
    assert "nvml counter gives 2500 J, the integral of the sampled power 1250 J" in warning


def test_an_interval_without_marks_is_placed_from_the_end_time_with_a_warning() -> None:
    results = gpu_run()
    del results["results.timed_start"], results["results.timed_end"]
    results["results.end_time"] = at(8.0)  # the last 10 x 500 ms: 3 s to 8 s
    keys = energy.summarize(results, STARTED, throughput=200.0)
    assert keys["results.energy_j"] == pytest.approx(2500.0)
    assert keys["results.energy_warnings"] == [
        "the backend marked no timed interval: it is placed from its end time and batch times"]


@pytest.mark.parametrize(("change", "reason"), [
    ({"results.timed_end": at(12.0)}, "the nvml counter has no readings around both ends"),
    ({"results.timed_start": None, "results.time_data": None},
     "the timed interval cannot be placed"),
])
def test_an_interval_the_samples_do_not_cover(change, reason) -> None:
    results = gpu_run()
    del results["results.use.gpu_power"]
    results.update(change)
    keys = energy.summarize(results, STARTED, throughput=200.0)
    assert reason in keys["results.energy_unavailable"]
    assert "results.energy_j" not in keys


def test_no_rapl_gives_its_reason() -> None:
    results = {"results.use.time": [0.5, 1.0], "results.use.cpu": [100.0, 100.0],
               "results.use.energy_unavailable": "no RAPL counters: /sys/class/powercap: "
                                                 "No such file or directory",
               "results.timed_start": at(0.6), "results.timed_end": at(0.9)}
    keys = energy.summarize(results, STARTED, throughput=10.0)
    assert keys == {"results.energy_unavailable": "no RAPL counters: /sys/class/powercap: "
                                                  "No such file or directory"}


def test_no_monitor_means_no_energy_keys() -> None:
    assert energy.summarize({"results.time_data": [1.0]}, STARTED, throughput=1.0) == {}


def test_each_gpu_and_each_node() -> None:
    one = gpu_run(watts=500.0)
    two = gpu_run(watts=300.0)
    node_a = {"time": one["results.use.time"], "gpu_energy": one["results.use.gpu_energy"],
              "gpu0_energy": [e * 0.6 for e in one["results.use.gpu_energy"]],
              "gpu1_energy": [e * 0.4 for e in one["results.use.gpu_energy"]]}
    node_b = {"time": two["results.use.time"], "gpu_power": two["results.use.gpu_power"]}
    results = {"results.use.time": one["results.use.time"],
               "results.use.nodes": {"b": node_b, "a": node_a},
               "results.timed_start": at(3.0), "results.timed_end": at(8.0)}
    keys = energy.summarize(results, STARTED, throughput=100.0)
    assert keys["results.energy_j"] == pytest.approx(2500.0 + 1500.0)
    assert keys["results.energy_j.a"] == pytest.approx(2500.0)
    assert keys["results.energy_j.a.gpu0"] == pytest.approx(1500.0)
    assert keys["results.energy_j.a.gpu1"] == pytest.approx(1000.0)
    assert keys["results.energy_j.b"] == pytest.approx(1500.0)
    assert keys["results.energy_source"] == "nvml counter, power integral"


@given(st.lists(st.floats(0.0, 2000.0), min_size=3, max_size=30),
       st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_counter_and_integral_of_one_power_series_agree(watts, a, b) -> None:
    """A counter that integrates the power exactly equals the power's trapezoidal integral."""
    times = [float(i) for i in range(len(watts))]
    counter = [0.0]
    for i in range(1, len(watts)):
        counter.append(counter[-1] + (watts[i] + watts[i - 1]) / 2.0)
    start, end = sorted((a * (len(watts) - 1), b * (len(watts) - 1)))
    by_power = energy.power_energy(times, watts, start, end, hold=0.0)
    by_counter = energy.counter_energy(times, counter, start, end)
    # Linear interpolation of the counter inside a sample period assumes constant power
    # there, the trapezoid a linear one: they part at most by the corner's triangles.
    slack = max(watts) * 0.25 * 2 + 1e-6
    assert by_counter == pytest.approx(by_power, abs=slack)
    if start == math.floor(start) and end == math.floor(end):
        assert by_counter == pytest.approx(by_power, abs=1e-6)


def test_a_counter_is_never_extrapolated_and_never_goes_back() -> None:
    assert energy.counter_at([1.0, 2.0], [10.0, 20.0], 0.5) is None
    # A mark just before the first sample (the monitor sampled 20 ms after seeing it) is
    # read on the line through the first two samples.
    assert energy.counter_at([1.0, 2.0], [10.0, 20.0], 0.95) == pytest.approx(9.5)
    assert energy.counter_at([1.0, 2.0], [10.0, 20.0], 2.05) == pytest.approx(20.5)
    assert energy.counter_at([1.0], [10.0], 1.05) is None
    assert energy.counter_at([1.0, 2.0, 3.0], [10.0, math.nan, 30.0], 2.5) == 25.0
    assert energy.counter_energy([1.0, 2.0, 3.0], [10.0, 20.0, 5.0], 1.0, 3.0) is None
    # Power holds its nearest sample for up to `hold` seconds beyond the samples.
    assert energy.power_energy([1.0, 2.0], [100.0, 100.0], 0.5, 2.5, hold=0.5) == 200.0
    assert energy.power_energy([1.0, 2.0], [100.0, 100.0], 0.4, 2.0, hold=0.5) is None


# -- MFU and peak memory ----------------------------------------------------------------------
GPU = {"exp.device_type": "gpu", "exp.dtype": "float16", "exp.num_gpus": 1,
       "exp.use_tensor_core": True, "exp.peak_tflops": 0}


def test_mfu_from_the_table() -> None:
    results = {"results.flops_per_sample": 24.3e9, "results.gpu_model": "NVIDIA H100 80GB HBM3",
               "results.mem_peak": 30000.5}
    keys = efficiency.summarize(GPU, results, throughput=3000.0)
    assert keys["results.achieved_tflops"] == pytest.approx(72.9)
    assert keys["results.peak_tflops"] == 989.5
    assert keys["results.peak_source"].startswith("gpu_peak_tflops.yaml: H100 SXM, fp16 dense")
    assert keys["results.mfu"] == pytest.approx(72.9 / 989.5)
    assert keys["results.gpu_mem_peak_mb"] == 30000.5


@pytest.mark.parametrize(("name", "params", "peak"), [
    ("NVIDIA H100 PCIe", {}, 756.5),
    ("NVIDIA H100 NVL", {}, 835.5),
    ("NVIDIA H200", {"exp.dtype": "bfloat16"}, 989.5),
    ("NVIDIA A100-SXM4-80GB", {"exp.dtype": "float32"}, 156.0),           # TF32
    ("NVIDIA A100 80GB PCIe", {"exp.dtype": "float32", "exp.use_tensor_core": False}, 19.5),
    ("NVIDIA A10", {}, 125.0),                                             # not the A100's
    ("NVIDIA L40S", {}, 366.5),
    ("NVIDIA L4", {}, 121.0),
    ("Tesla V100-SXM2-32GB", {"exp.dtype": "float32"}, 15.7),            # no TF32: fp32
])
def test_the_peak_of_each_gpu(name, params, peak) -> None:
    keys = efficiency.summarize({**GPU, **params}, {"results.flops_per_sample": 1e9,
                                                    "results.gpu_model": name}, 1000.0)
    assert keys["results.peak_tflops"] == peak


def test_exp_peak_tflops_overrides_and_several_gpus_divide() -> None:
    params = {**GPU, "exp.peak_tflops": 100.0, "exp.num_gpus": 4}
    keys = efficiency.summarize(params, {"results.flops_per_sample": 1e9}, throughput=40000.0)
    assert keys["results.peak_source"] == "exp.peak_tflops"
    assert keys["results.mfu"] == pytest.approx(40.0 / 400.0)


@pytest.mark.parametrize(("params", "results", "reason"), [
    ({}, {"results.gpu_model": "NVIDIA B9000"}, "'NVIDIA B9000' is not in"),
    ({"exp.dtype": "bfloat16"}, {"results.gpu_model": "Tesla V100-PCIE-16GB"},
     "no bf16 peak for V100 PCIe"),
    ({}, {}, "the backend did not name its GPU"),
])
def test_no_peak_gives_a_reason(params, results, reason) -> None:
    keys = efficiency.summarize({**GPU, **params}, {"results.flops_per_sample": 1e9,
                                                    **results}, 1000.0)
    assert reason in keys["results.mfu_unavailable"] and "results.mfu" not in keys
    assert keys["results.achieved_tflops"] == pytest.approx(1.0)


def test_a_cpu_run_has_tflops_but_no_mfu_or_gpu_memory() -> None:
    params = {**GPU, "exp.device_type": "cpu"}
    keys = efficiency.summarize(params, {"results.flops_per_sample": 1e9,
                                         "results.mem_peak": 500.0}, 1000.0)
    assert keys == {"results.achieved_tflops": 1.0,
                    "results.mfu_unavailable": efficiency.CPU_REASON}
    assert "set exp.peak_tflops" in efficiency.CPU_REASON


@pytest.mark.parametrize("results", [{}, {"results.flops_unavailable": "MXNet counts none"}])
def test_a_cpu_run_without_flops_says_why_it_has_no_mfu(results) -> None:
    keys = efficiency.summarize({**GPU, "exp.device_type": "cpu"}, results, 1000.0)
    assert keys == {"results.mfu_unavailable": efficiency.CPU_REASON}


def test_a_cpu_run_with_its_own_peak_has_an_mfu_and_a_failed_one_nothing() -> None:
    params = {**GPU, "exp.device_type": "cpu", "exp.peak_tflops": 2.0}
    keys = efficiency.summarize(params, {"results.flops_per_sample": 1e9}, 1000.0)
    assert keys["results.mfu"] == pytest.approx(0.5) and "results.mfu_unavailable" not in keys
    assert efficiency.summarize({**GPU, "exp.device_type": "cpu"}, {}, None) == {}


def test_the_summary_holds_energy_and_mfu_beside_the_statistics() -> None:
    results = {**gpu_run(), "results.flops_per_sample": 1e10,
               "results.gpu_model": "NVIDIA H100 80GB HBM3"}
    params = {**GPU, "exp.effective_batch": 100}
    keys = summary.summarize(params, results, STARTED)
    assert keys["results.throughput"] == pytest.approx(200.0)  # 100 per 500 ms
    assert keys["results.energy_per_sample_j"] == pytest.approx(2.5)
    assert keys["results.mfu"] == pytest.approx(2.0 / 989.5)
    assert "results.use.gpu_energy_mean" not in keys  # a counter has no mean
    assert usage.series_names(results) == ["gpu_power"]
