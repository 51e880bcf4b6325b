"""A decoder in `dlbs run`: every scenario generates, is stored, and is reported.

Llama 3's debug flavour on the CPU, through the planner, the recipe, the backend and the
results store, as a user runs it (docs/llm-serving.md); the server run is compiled (dynamo
and AOTAutograd, no C++ kernels) and must compile nothing inside LoadGen's run.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from evaluation_helpers import logs_by_scenario, statuses

from dlbs.config.loader import load_spec
from dlbs.plan.builder import Planner
from dlbs.results.summary import summarize

pytestmark = [pytest.mark.pytorch, pytest.mark.slow]

TINY = ["-P", "exp.model=llama3_debug", "-P", "exp.phase=inference", "-P",
        "exp.replica_batch=4", "-P", "exp.num_batches=2", "-P", "exp.input_tokens=24",
        "-P", "exp.output_tokens=8", "-P", "exp.num_samples=16", "-P",
        "exp.min_duration_s=0.3", "-P", "exp.min_query_count=12", "-P", "exp.target_qps=20",
        "-P", "exp.ttft_bound_ms=500", "-P", "exp.tpot_bound_ms=50"]
COMPILED_SERVER = json.dumps({"condition": {"exp.scenario": "server"},
                              "parameters": {"pytorch.compile": True,
                                             "exp.token_lengths": "uniform",
                                             "exp.compile_backend": "aot_eager"}})


def plan(*params: str) -> list[dict]:
    return list(Planner(load_spec(params=list(params))).experiments())


def test_every_scenario_of_a_decoder_runs_is_stored_and_reported(run_dlbs, tmp_path):
    result = run_dlbs("run", *TINY, "-E", COMPILED_SERVER, "-V",
                      'exp.scenario=["benchmark", "server", "offline", "max_qps"]',
                      timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    assert [status for _, status in statuses(tmp_path / "logs" / "results.db")] == ["ok"] * 4
    logs = logs_by_scenario(tmp_path / "logs")
    bench = logs["benchmark"]
    assert bench["exp.model_title"] and bench["results.num_requests"] == 8
    assert len(bench["results.time_data"]) == 2 * 7  # two generations of 7 decode steps
    bench.update(summarize(bench, bench))  # what the store holds: dlbs's statistics
    assert bench["results.throughput"] == pytest.approx(4 * 1000 / bench["results.time"])
    for key in ("results.ttft_p50", "results.tpot_p99", "results.prefill_tokens_per_second",
                "results.decode_tokens_per_second", "results.decode_bytes_per_step",
                "results.decode_bandwidth"):
        assert bench[key] > 0, key
    assert "results.decode_bandwidth_fraction" not in bench  # the CPU has no datasheet peak
    server = logs["server"]
    assert server["pytorch.compile"] is True and server["results.recompiles"] == 0
    assert server["exp.token_lengths"] == "uniform"
    assert server["results.latency_bound_met"] is True
    for name in ("server", "offline", "max_qps"):
        assert logs[name]["results.tokens_per_second"] > 0, name
        assert logs[name]["results.recompiles"] == 0, name
    assert logs["max_qps"]["results.max_qps"] > 0
    assert logs["max_qps"]["results.ttft_p99"] <= 500
    assert logs["max_qps"]["results.tpot_p99"] <= 50
    report = run_dlbs("report", "logs", "--type", "latency", "--format", "csv")
    assert report.returncode == 0, report.stderr
    rows = {row["scenario"]: row for row in csv.DictReader(io.StringIO(report.stdout))}
    assert set(rows) == {"benchmark", "server", "offline", "max_qps"}
    for scenario in ("benchmark", "server", "max_qps"):
        assert float(rows[scenario]["ttft_p50"]) > 0 and float(rows[scenario]["tpot_p99"]) > 0
    for scenario in rows:
        assert float(rows[scenario]["tokens_per_second"]) > 0


def test_decoder_defaults_and_refusals_are_planned():
    (llm,) = plan("exp.model=llama3_8b", "exp.scenario=max_qps", "exp.gpus=0")
    assert llm["exp.generates"] is True and llm["exp.phase"] == "inference"
    assert (llm["exp.input_tokens"], llm["exp.output_tokens"]) == (128, 256)
    assert (llm["exp.ttft_bound_ms"], llm["exp.tpot_bound_ms"]) == (2000.0, 100.0)
    assert "--ttft_bound_ms 2000.0 --tpot_bound_ms 100.0" in llm["exp.evaluation_args"]
    (seventy,) = plan("exp.model=llama3_70b", "exp.scenario=server", "exp.target_qps=1")
    assert seventy["exp.tpot_bound_ms"] == 200.0  # MLPerf's Llama 2 70B
    (resnet,) = plan("exp.model=resnet50")
    for key in ("exp.generates", "exp.input_tokens", "exp.token_lengths", "exp.ttft_bound_ms"):
        assert resnet[key] is None, key
    assert not any("token" in arg for arg in resnet["pytorch.args"])
    from dlbs.errors import PlanError

    for params, words in (
            (["exp.model=resnet50", "exp.input_tokens=64"], "exp.input_tokens applies to LLM"),
            (["exp.model=llama3_8b", "exp.scenario=accuracy", "exp.data_dir=/d"],
             "a decoder runs exp.scenario benchmark, server, offline or max_qps"),
            (["exp.model=llama3_8b", "exp.phase=inference", "exp.gpus=0,1"],
             "a decoder's benchmark runs on one GPU"),
            (["exp.model=llama3_8b", "exp.scenario=offline", "exp.framework=mxnet"],
             "LLM generation runs in the pytorch backend")):
        with pytest.raises(PlanError) as error:
            plan(*params)
        assert words in str(error.value)
