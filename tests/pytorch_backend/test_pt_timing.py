"""Accounting: a workload of known duration is reported with that duration."""

from __future__ import annotations

import time

import pytest
from pytorch_benchmarks.timing import run_timed_loop

# Times measured against known sleeps: alone on the machine (tests/parallel.py).
pytestmark = [pytest.mark.pytorch, pytest.mark.serial]


@pytest.mark.parametrize("phase", ["inference", "training"])
def test_sleeping_forward_is_timed_within_ten_percent(backend, extra_models, phase):
    """The model's forward sleeps 50 ms; the rest of a step is negligible next to it."""
    # Another program's load can only make a step longer than its sleep, never shorter: the
    # best of up to three runs tells a backend that misreports from a machine that is busy.
    means = []
    for _ in range(3):
        run = backend(
            "--model",
            "sleep_50ms",
            "--extra_models",
            str(extra_models),
            "--device",
            "cpu",
            "--batch_size",
            "2",
            "--num_batches",
            "6",
            "--num_warmup_batches",
            "1",
            "--forward_only",
            str(phase == "inference"),
            "--num_threads",
            "1",
        )
        assert run.returncode == 0, run.stderr[-2000:]
        assert all(50.0 <= t for t in run.values["results.time_data"])
        assert run.values["results.time_median"] >= 50.0
        assert run.values["results.throughput"] == pytest.approx(
            2000.0 / run.values["results.time"])
        means.append(run.values["results.time"])
        if means[-1] <= 55.0:
            break
    assert 50.0 <= min(means) <= 55.0


def test_every_interval_ends_with_a_synchronize():
    """The loop synchronizes once before timing and after every batch, warm-up included."""
    events: list[str] = []

    def next_batch():
        events.append("fetch")
        return None, None

    def step(inputs, labels):
        events.append("step")

    def sync():
        events.append("sync")

    timings = run_timed_loop(next_batch, step, sync, num_warmup=2, num_batches=3)
    assert events == ["sync"] + ["fetch", "step", "sync"] * 5
    assert len(timings.warmup_ms) == 2 and len(timings.batch_ms) == 3


def test_device_time_is_counted_until_the_synchronize_returns():
    """Work that finishes only at the synchronize (as queued GPU work does) is in the batch."""

    def sync():
        time.sleep(0.03)  # the device finishing queued work

    timings = run_timed_loop(lambda: (None, None), lambda x, y: None, sync, 0, 4)
    assert all(29.0 <= t <= 45.0 for t in timings.batch_ms)


def test_data_wait_is_part_of_the_batch_and_reported_apart():
    def slow_fetch():
        time.sleep(0.02)
        return None, None

    def step(x, y):
        time.sleep(0.01)

    timings = run_timed_loop(slow_fetch, step, lambda: None, 1, 4)
    assert all(19.0 <= w <= 30.0 for w in timings.data_wait_ms)
    assert all(29.0 <= t <= 45.0 for t in timings.batch_ms)
