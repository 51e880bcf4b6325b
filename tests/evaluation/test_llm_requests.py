"""The synthetic requests of LLM generation, their flags, and the decode bandwidth's fraction."""

from __future__ import annotations

import statistics

import pytest
from benchmark_common.generation_options import GenerationFlagError, GenerationOptions, check
from benchmark_common.token_lengths import (
    LengthsError,
    longest,
    request_lengths,
)

from dlbs.results.bandwidth import summarize as bandwidth_summary


def test_fixed_lengths_are_the_flags():
    assert request_lengths("fixed", 3, 128, 256) == [(128, 256)] * 3
    assert longest("fixed", 128, 256) == (128, 256)


def test_uniform_lengths_stay_in_their_range_and_repeat_with_the_seed():
    drawn = request_lengths("uniform", 2000, 100, 40, range_ratio=0.5, seed=7)
    assert drawn == request_lengths("uniform", 2000, 100, 40, range_ratio=0.5, seed=7)
    assert drawn != request_lengths("uniform", 2000, 100, 40, range_ratio=0.5, seed=8)
    prompts, answers = [p for p, _ in drawn], [o for _, o in drawn]
    assert (min(prompts), max(prompts)) == (50, 150)
    assert (min(answers), max(answers)) == (20, 60)
    assert abs(statistics.mean(prompts) - 100) < 3
    assert longest("uniform", 100, 40, 0.5) == (150, 60)
    # Never fewer than 1 prompt token and 2 output tokens, whatever the ratio.
    assert min(request_lengths("uniform", 200, 1, 2, range_ratio=0.9)) >= (1, 2)


def test_openorca_lengths_have_the_datasets_statistics():
    drawn = request_lengths("openorca", 50_000, 0, 0, seed=1)
    prompts, answers = [p for p, _ in drawn], [o for _, o in drawn]
    # The dataset's columns: prompts mean 222.3, median 152, max 1,021; answers mean 218.9,
    # median 190, min 3, max 1,016 (the quantile table is linear between its points).
    assert abs(statistics.mean(prompts) / 222.3 - 1) < 0.03
    assert abs(statistics.mean(answers) / 218.9 - 1) < 0.03
    assert abs(statistics.median(prompts) - 152) <= 3
    assert abs(statistics.median(answers) - 190) <= 3
    assert 48 <= min(prompts) and max(prompts) <= 1021
    assert 3 <= min(answers) and max(answers) <= 1016
    assert longest("openorca", 0, 0) == (1021, 1016)


@pytest.mark.parametrize("args, words", [
    (("zipf", 1, 1, 2), "unknown token length distribution 'zipf'"),
    (("fixed", 0, 1, 2), "need at least 1 request"),
    (("uniform", 1, 8, 8, 1.5), "range ratio must be in [0, 1)"),
])
def test_lengths_that_describe_no_request_are_refused(args, words):
    with pytest.raises(LengthsError) as error:
        request_lengths(*args)
    assert words in str(error.value)


@pytest.mark.parametrize("field, value, words", [
    ("output_tokens", 1, "--output_tokens must be >= 2"),
    ("input_tokens", 0, "--input_tokens must be >= 1"),
    ("tpot_bound_ms", 0.0, "--tpot_bound_ms must be a finite number > 0"),
    ("kv_cache_tokens", -1, "--kv_cache_tokens must be >= 0"),
    ("token_range_ratio", 1.0, "--token_range_ratio must be in [0, 1)"),
])
def test_generation_flags_are_checked(field, value, words):
    import dataclasses

    with pytest.raises(GenerationFlagError) as error:
        check(dataclasses.replace(GenerationOptions(), **{field: value}))
    assert str(error.value).startswith(words)


def test_the_decode_bandwidth_fraction_is_of_the_gpus_datasheet_peak():
    gpu = {"exp.device_type": "gpu"}
    # 16 GB a step in 4 ms: 4 TB/s, of the H200's 4.8.
    found = bandwidth_summary(gpu, {"results.decode_bytes_per_step": 16e9,
                                    "results.gpu_model": "NVIDIA H200"}, 4.0)
    assert found["results.decode_bandwidth"] == pytest.approx(4.0)
    assert found["results.peak_bandwidth"] == 4.8
    assert found["results.decode_bandwidth_fraction"] == pytest.approx(4.0 / 4.8)
    assert "H200 SXM" in found["results.bandwidth_source"]
    h100 = bandwidth_summary(gpu, {"results.decode_bytes_per_step": 16e9,
                                   "results.gpu_model": "NVIDIA H100 80GB HBM3"}, 8.0)
    assert h100["results.peak_bandwidth"] == 3.35
    a100 = bandwidth_summary(gpu, {"results.decode_bytes_per_step": 1e9,
                                   "results.gpu_model": "NVIDIA A100-SXM4-80GB"}, 1.0)
    assert a100["results.peak_bandwidth"] == 2.039
    unknown = bandwidth_summary(gpu, {"results.decode_bytes_per_step": 1e9,
                                      "results.gpu_model": "Radeon 9000"}, 1.0)
    assert "decode_bandwidth_fraction" not in unknown
    assert "set exp.peak_memory_bandwidth" in unknown["results.bandwidth_unavailable"]
    given = bandwidth_summary({**gpu, "exp.peak_memory_bandwidth": 2.0},
                              {"results.decode_bytes_per_step": 1e9}, 1.0)
    assert given["results.decode_bandwidth_fraction"] == pytest.approx(0.5)
    assert given["results.bandwidth_source"] == "exp.peak_memory_bandwidth"
    # The CPU has no table; without bytes there is nothing to derive.
    assert "results.peak_bandwidth" not in bandwidth_summary(
        {"exp.device_type": "cpu"}, {"results.decode_bytes_per_step": 1e9}, 1.0)
    assert bandwidth_summary(gpu, {}, 1.0) == {}
