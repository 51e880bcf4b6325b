"""LLM serving through LoadGen on the CPU: token latencies are LoadGen's own, replicas share it.

The decoder is Llama 3's debug flavour; LoadGen runs for a fraction of a second. What is
checked is the bookkeeping (docs/llm-serving.md): the time to first token, the time per
output token and tokens per second the backend reports are the numbers of LoadGen's own
summary; every request is reported with its first token and its token count; two engines
(the CPU standing in for two GPUs) serve one LoadGen from one queue.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from evaluation_helpers import run_backend

pytestmark = [pytest.mark.pytorch]

TINY = ["--model", "llama3_debug", "--forward_only", "true", "--device", "cpu",
        "--batch_size", "4", "--input_tokens", "24", "--output_tokens", "10",
        "--num_samples", "16", "--min_duration_s", "0.5", "--min_query_count", "16"]


def summary_numbers(folder: Path) -> dict[str, float]:
    """LoadGen's human summary (mlperf_log_summary.txt) as {line's name: number}."""
    found = {}
    for line in (folder / "mlperf_log_summary.txt").read_text().splitlines():
        match = re.fullmatch(r"\s*([^:]+?)\s*:\s*(-?[0-9.]+)\s*", line)
        if match:
            found[match.group(1)] = float(match.group(2))
    return found


def test_server_token_latencies_are_loadgens_summary(tmp_path):
    folder = tmp_path / "server.loadgen"
    run = run_backend("pytorch", *TINY, "--scenario", "server", "--target_qps", "30",
                      "--token_lengths", "uniform", "--loadgen_dir", str(folder))
    assert run.returncode == 0, run.stderr
    values = run.values
    summary = summary_numbers(folder)
    # LoadGen's summary in ns; the results in ms, the same numbers.
    for name, line in (("p50", "50.00 percentile"), ("p90", "90.00 percentile"),
                       ("p99", "99.00 percentile")):
        assert values[f"results.ttft_{name}"] * 1e6 == pytest.approx(
            summary[f"{line} first token latency (ns)"], abs=0.5)
        assert values[f"results.tpot_{name}"] * 1e6 == pytest.approx(
            summary[f"{line} time to output token (ns)"], abs=0.5)
    assert values["results.ttft_mean"] * 1e6 == pytest.approx(
        summary["Mean First Token latency (ns)"], abs=0.5)
    assert values["results.tpot_mean"] * 1e6 == pytest.approx(
        summary["Mean Time per Output Token (ns)"], abs=0.5)
    assert values["results.tokens_per_second"] == pytest.approx(
        summary["Completed tokens per second"], abs=0.006)
    assert values["results.throughput"] == values["results.tokens_per_second"]
    # Every request had its first token before its last, and at most 10 tokens of ~0 ms.
    assert 0 < values["results.ttft_p50"] <= values["results.latency_p50"]
    assert values["results.latency_bound_met"] is True  # 2 s and 100 ms: far above the CPU's
    assert (values["results.ttft_bound_ms"], values["results.tpot_bound_ms"]) == (2000, 100)
    assert values["results.target_qps"] == 30
    assert values["results.recompiles"] == 0
    detail = (folder / "mlperf_log_detail.txt").read_text()
    assert '"key": "requested_use_token_latencies", "value": true' in detail
    assert '"is_error": true' not in detail  # no request without a first token or tokens


def test_offline_tokens_per_second_is_loadgens(tmp_path):
    folder = tmp_path / "offline.loadgen"
    run = run_backend("pytorch", *TINY, "--scenario", "offline", "--loadgen_dir", str(folder))
    assert run.returncode == 0, run.stderr
    summary = summary_numbers(folder)
    assert run.values["results.tokens_per_second"] == pytest.approx(
        summary["Tokens per second"], abs=0.006)
    # Every request generates its 10 tokens: LoadGen counts them.
    assert run.values["results.tokens_per_second"] == pytest.approx(
        10 * run.values["results.qps"], rel=1e-3)
    assert "served: " in run.stdout and "busy slots per step" in run.stdout


def test_two_engines_serve_one_loadgen(tmp_path):
    """Two devices (the CPU standing in for GPUs), a replica and its slots on each."""
    import torch
    from benchmark_common.token_harness import run_token_evaluation
    from pytorch_benchmarks.cli import parse_options
    from pytorch_benchmarks.generation.system import TorchGenerationSystem

    opts = parse_options([*TINY, "--scenario", "offline", "--num_threads", "1",
                          "--loadgen_dir", str(tmp_path / "two")])
    cpu = torch.device("cpu")
    system = TorchGenerationSystem(opts, [cpu, cpu])
    assert system.replicas == 2 and system.engines[0] is not system.engines[1]
    said: list[str] = []

    def abort(error: BaseException) -> None:  # a failure inside LoadGen's callbacks
        raise AssertionError(f"aborted: {error!r}")

    results = run_token_evaluation(system, opts.evaluation, opts.generation, say=said.append,
                                   abort=abort)
    assert results["results.tokens_per_second"] == pytest.approx(10 * results["results.qps"],
                                                            rel=1e-3)
    served = next(line for line in said if line.startswith("served: "))
    counts = [int(part.split(" requests")[0]) for part in served[len("served: "):].split("; ")]
    assert len(counts) == 2 and min(counts) > 0, served
    assert sum(counts) == results["results.num_samples"]
