"""The statistics engine: one definition of every batch-time statistic, checked."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlbs.results import stats
from dlbs.results.summary import summarize

PARAMS = {"exp.replica_batch": 32, "exp.num_gpus": 2, "exp.effective_batch": 64}


def test_statistics_of_known_samples() -> None:
    computed = stats.sample_statistics([10.0, 20.0, 30.0, 40.0])
    assert computed == {
        "results.time": 25.0,
        "results.time_std": pytest.approx(math.sqrt(500.0 / 3)),   # ddof=1: divide by n-1
        "results.time_median": 25.0,                                # mean of the middle two
        "results.time_p90": pytest.approx(37.0),                    # 30 + 0.7 x 10
        "results.time_p95": pytest.approx(38.5),
        "results.time_p99": pytest.approx(39.7),
        "results.time_min": 10.0, "results.time_max": 40.0, "results.time_count": 4,
    }
    assert stats.DDOF == 1
    assert stats.sample_statistics([5.0])["results.time_std"] is None   # undefined for n=1


@given(st.lists(st.floats(0.001, 1e6, allow_nan=False), min_size=2, max_size=200))
def test_statistics_agree_with_numpy(samples: list[float]) -> None:
    data = np.asarray(samples)
    computed = stats.sample_statistics(samples)
    assert computed["results.time"] == pytest.approx(data.mean(), rel=1e-12)
    assert computed["results.time_std"] == pytest.approx(data.std(ddof=1), rel=1e-9, abs=1e-9)
    for key, q in (("results.time_median", 50), ("results.time_p90", 90),
                   ("results.time_p99", 99)):
        assert computed[key] == pytest.approx(np.percentile(data, q), rel=1e-12)
    assert computed["results.time_min"] <= computed["results.time_median"] <= \
        computed["results.time_p90"] <= computed["results.time_p99"] <= \
        computed["results.time_max"]


def test_summary_from_samples_replaces_the_backends_values() -> None:
    samples = [9.0, 10.0, 11.0, 10.0]
    summary = stats.summarize(PARAMS, {
        "results.time_data": samples, "results.warmup_time_data": [50.0, 30.0],
        "results.time": 10.0, "results.time_std": float(np.std(samples)),   # ddof=0
        "results.throughput": 6400.0})
    assert summary["results.stats_source"] == "dlbs"
    assert summary["results.time_std"] == pytest.approx(np.std(samples, ddof=1))
    assert summary["results.throughput"] == 6400.0         # 64 x 1000 / 10
    assert (summary["results.warmup_time"], summary["results.warmup_count"]) == (40.0, 2)
    # A population std (ddof=0, as PyTorch's and the dummy backend print) is a convention:
    assert "results.stats_warnings" not in summary


def test_a_backend_value_that_the_samples_contradict_is_a_warning() -> None:
    summary = stats.summarize(PARAMS, {
        "results.time_data": [10.0, 10.0], "results.time": 12.0,
        "results.time_median": 10.0, "results.throughput": 3200.0})
    assert summary["results.time"] == 10.0
    assert summary["results.stats_warnings"] == [
        "results.time: the backend printed 12.0, its per-batch times give 10",
        "results.throughput: the backend printed 3200.0, its per-batch times give 6400",
    ]


def test_without_samples_the_backend_values_stand() -> None:
    summary = summarize(PARAMS, {"results.time": 50.0, "results.time_std": 1.0,
                                 "results.latency_p99": 3.5, "results.qps": 990.0})
    assert summary["results.stats_source"] == "backend"
    assert (summary["results.time"], summary["results.time_std"]) == (50.0, 1.0)
    # DLBS logs print no throughput: it follows from the batch and the mean.
    assert summary["results.throughput"] == 1280.0
    # LoadGen's measurements are kept as printed.
    assert (summary["results.latency_p99"], summary["results.qps"]) == (3.5, 990.0)


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [1.0, -2.0], ["1"], [True], "12",
                                 [[1.0]], None])
def test_unusable_samples_are_not_statistics(bad: object) -> None:
    assert stats.finite_samples(bad) is None
    summary = stats.summarize(PARAMS, {"results.time_data": bad, "results.time": 5.0})
    assert summary["results.stats_source"] == "backend"


def test_samples_pack_and_unpack_exactly() -> None:
    samples = np.asarray([0.1, 1e-300, 123456.789, 0.0])
    assert stats.pack_samples(None) is None and stats.unpack_samples(None) is None
    assert stats.unpack_samples(stats.pack_samples(samples)).tolist() == samples.tolist()


def test_summary_keeps_scalars_and_text_lists_only() -> None:
    summary = summarize({}, {"results.time_data": [1.0, 2.0], "results.use.cpu": [1.0],
                             "results.use.warnings": ["no GPU series"], "exp.framework_ver":
                             "2.11", "results.mem_peak": 10.0, "results.obj": {"a": 1}})
    assert "results.time_data" not in summary and "results.use.cpu" not in summary
    assert "results.obj" not in summary
    assert summary["results.use.warnings"] == ["no GPU series"]
    assert (summary["exp.framework_ver"], summary["results.mem_peak"]) == ("2.11", 10.0)
