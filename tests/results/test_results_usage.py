"""Monitor summaries over the timed interval (docs/monitor.md, `results.use.*`)."""

from __future__ import annotations

import math

from dlbs.results import usage

STARTED = "2026-01-01T10:00:00+00:00"


def monitored(end: str | None = "2026-01-01T10:00:10+00:00") -> dict:
    """10 s of samples, one per second; the timed batches are the last 4 s (6 to 10)."""
    results = {
        "results.use.time": [float(t) for t in range(1, 11)],
        "results.use.cpu": [900.0] * 5 + [100.0] * 5,          # start-up burns CPU
        "results.use.gpu_util": [0.0] * 5 + [90.0, math.nan, 94.0, 96.0, None],
        "results.use.gpu_mem": [100.0] * 5 + [7000.0, 7100.0, 7200.0, 7300.0, 7400.0],
        "results.time_data": [1000.0] * 4,
        "results.use.warnings": ["a query failed"],
    }
    if end is not None:
        results["results.end_time"] = end
    return results


def test_summaries_cover_the_timed_batches_only() -> None:
    summary = usage.summarize(monitored(), STARTED)
    assert summary["results.use.interval"] == "timed"
    assert (summary["results.use.timed_start"], summary["results.use.timed_end"]) == (6.0, 10.0)
    assert summary["results.use.samples"] == 5                      # t = 6 ... 10
    assert summary["results.use.cpu_mean"] == 100.0                 # not the start-up
    assert summary["results.use.gpu_util_mean"] == 93.33333333333333  # NaN and null left out
    assert summary["results.use.gpu_util_max"] == 96.0
    assert summary["results.use.gpu_mem_max"] == 7400.0
    assert "results.use.warnings_mean" not in summary


def test_whole_run_when_the_interval_cannot_be_placed() -> None:
    for results, started in ((monitored(end=None), STARTED), (monitored(), None),
                             (monitored(end="2026-01-01T09:00:00+00:00"), STARTED)):
        summary = usage.summarize(results, started)
        assert summary["results.use.interval"] == "whole run"
        assert summary["results.use.samples"] == 10
        assert summary["results.use.cpu_mean"] == 500.0


def test_nothing_without_monitor_series() -> None:
    assert usage.summarize({"results.time_data": [1.0]}, STARTED) == {}
    all_nan = monitored()
    all_nan["results.use.gpu_power"] = [None] * 10
    assert "results.use.gpu_power_mean" not in usage.summarize(all_nan, STARTED)
