"""`dlbs run` of the transformers on the CPU: planned, run, stored and reported.

The debug flavours (2 layers, dim 64) of each family; a sequence longer than the model's
context is one clear reason. SLURM's two nodes: tests/run/test_run_slurm.py.
"""

from __future__ import annotations

import json

import pytest

from dlbs.config.loader import load_spec
from dlbs.plan.builder import Planner
from dlbs.results.protocol import parse_log
from tests.run.conftest import attempts

pytestmark = pytest.mark.pytorch

FAST = ["-P", "exp.num_batches=2", "-P", "exp.num_warmup_batches=1",
        "-P", "pytorch.num_threads=1"]


@pytest.mark.slow
def test_each_family_trains_in_one_sweep_and_reports_tokens(run_dlbs, tmp_path):
    result = run_dlbs("run", *FAST, "-V", 'exp.model=["llama3_debug","gpt2_debug","bert_debug"]',
                      timeout=300)
    assert result.returncode == 0, result.stderr
    assert "3 ok" in result.stderr
    for log in sorted((tmp_path / "logs").glob("*.log")):
        values = parse_log(log).values
        # The transformers' defaults: bfloat16, AdamW, their sequence, no compile on a CPU.
        assert (values["exp.dtype"], values["pytorch.optimizer"], values["exp.seq_len"],
                values["pytorch.compile"], values["exp.replica_batch"]) == (
            "bfloat16", "adamw", 128, False, 2)
        assert values["results.tokens_per_second"] == pytest.approx(
            values["results.throughput"] * 128)
    report = run_dlbs("report", "logs", "--format", "json")
    assert report.returncode == 0, report.stderr
    document = json.loads(report.stdout)
    assert "exp.seq_len" in document["row_keys"]
    for row in document["rows"]:
        assert row["seq_len"] == 128 and row["tokens_per_second"] > 0
    table = run_dlbs("report", "logs")
    assert "tokens/s" in table.stdout and "sequence" in table.stdout


def test_a_sequence_longer_than_the_context_is_one_clear_reason(run_dlbs, tmp_path):
    result = run_dlbs("run", *FAST, "-P", "exp.model=llama3_debug", "-P", "exp.seq_len=1000")
    assert result.returncode == 1
    (row,) = attempts(tmp_path / "logs" / "results.db")
    assert row[2] == "failure"
    assert "\n" not in row[3] and row[3].endswith(
        "--seq_len 1000: llama3_debug takes at most 512 tokens (its published context)")
    assert "llama3_debug takes at most 512 tokens" in result.stderr
    assert "Traceback" not in (next((tmp_path / "logs").glob("*.log"))).read_text()


def _planned(*params: str) -> list[dict]:
    spec = load_spec(None, params=params)
    return list(Planner(spec, {"DLBS_ROOT": "/opt/dlbs", "HOME": "/root"}).experiments())


def test_the_plan_gives_transformers_their_defaults_and_leaves_the_others_as_they_were():
    (llama,) = _planned("exp.model=llama3_8b", "exp.gpus=0,1,2,3")
    assert (llama["exp.dtype"], llama["exp.seq_len"], llama["exp.replica_batch"],
            llama["pytorch.optimizer"], llama["pytorch.compile"], llama["pytorch.timing"],
            llama["pytorch.data_parallel"], llama["pytorch.activation_checkpointing"],
            llama["pytorch.lr"], llama["pytorch.channels_last"]) == (
        "bfloat16", 8192, 1, "adamw", True, "events", "fsdp", "none", 0.0003, False)
    assert llama["exp.oom_class"] == "fsdp over 4, checkpointing none"
    args = llama["pytorch.args"]
    assert args[args.index("--seq_len") + 1] == 8192
    assert args[-4:] == ["--activation_checkpointing", "none", "--data_parallel", "fsdp"]
    (bert,) = _planned("exp.model=bert_large", "exp.seq_len=512")
    assert (bert["exp.seq_len"], bert["exp.replica_batch"], bert["pytorch.compile"]) == (
        512, 32, False)
    (resnet,) = _planned("exp.model=resnet50", "exp.gpus=0")
    assert (resnet["exp.dtype"], resnet["exp.seq_len"], resnet["exp.replica_batch"],
            resnet["pytorch.optimizer"], resnet["pytorch.compile"], resnet["exp.oom_class"]) \
        == ("float32", None, 16, "sgd", False, "")
    identity = sum(resnet["exp.id_params"].values(), [])
    for name in ("exp.transformer", "exp.seq_len", "pytorch.activation_checkpointing",
                 "pytorch.data_parallel"):
        assert name not in identity
    assert not any(arg.startswith(("--seq_len", "--activation_checkpointing",
                                   "--data_parallel")) for arg in resnet["pytorch.args"])
