"""Transformer training in the backend (sequence.py): the debug flavours on the CPU.

One process and two (torchrun, gloo: FSDP2 and DDP); checkpointing; inference; the
results' keys (tokens/s, the formula's FLOPs); what is refused, in one line.
"""

from __future__ import annotations

import pytest
from pytorch_backend_helpers import PYTHON_DIR  # noqa: F401  (puts python/ on sys.path)
from pytorch_benchmarks.models import get_model_spec
from test_pt_user_errors import assert_refused

pytestmark = pytest.mark.pytorch

FAST = ["--device", "cpu", "--batch_size", "2", "--num_batches", "2", "--num_warmup_batches",
        "1", "--num_threads", "1", "--optimizer", "adamw", "--lr", "0.0003"]
TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def check_sequence_results(values: dict, model: str, seq_len: int, replicas: int,
                           training: bool = True) -> None:
    assert values["results.status"] == "ok"
    assert values["results.seq_len"] == seq_len
    assert values["results.tokens_per_second"] == pytest.approx(
        values["results.throughput"] * seq_len)
    assert values["results.throughput"] == pytest.approx(2 * replicas * 1000.0 /
                                                         values["results.time"])
    per_token = get_model_spec(model).sequence.flops_per_token(seq_len)
    assert values["results.flops_per_token"] == pytest.approx(
        per_token if training else per_token / 3)
    assert values["results.flops_per_sample"] == pytest.approx(
        values["results.flops_per_token"] * seq_len)
    assert values["results.num_params"] == get_model_spec(model).sequence.num_params
    assert "results.tokens_per_second_per_gpu" not in values  # a CPU has no GPUs


@pytest.mark.parametrize(("model", "flags"), [
    ("llama3_debug", ["--dtype", "bfloat16", "--activation_checkpointing", "selective"]),
    ("gpt2_debug", ["--dtype", "float32", "--seq_len", "64"]),
    ("bert_debug", ["--dtype", "bfloat16", "--activation_checkpointing", "full",
                    "--seq_len", "256"]),
])
def test_each_family_trains_on_the_cpu(backend, model, flags):
    run = backend("--model", model, *FAST, *flags)
    assert run.returncode == 0, run.stderr[-3000:]
    seq_len = int(flags[flags.index("--seq_len") + 1]) if "--seq_len" in flags else 128
    check_sequence_results(run.values, model, seq_len, replicas=1)
    checkpointing = flags[flags.index("--activation_checkpointing") + 1] \
        if "--activation_checkpointing" in flags else "none"
    assert f"seq_len={seq_len} activation_checkpointing={checkpointing} data_parallel=None" \
        in run.stdout


def test_inference_of_a_transformer(backend):
    run = backend("--model", "gpt2_debug", *FAST, "--forward_only", "true", "--dtype",
                  "bfloat16")
    assert run.returncode == 0, run.stderr[-3000:]
    check_sequence_results(run.values, "gpt2_debug", 128, replicas=1, training=False)


@pytest.mark.slow
@pytest.mark.parametrize(("model", "parallel"), [("llama3_debug", "fsdp"),
                                                 ("bert_debug", "ddp")])
def test_two_processes_shard_with_fsdp2_or_replicate_with_ddp(backend, model, parallel):
    flags = [] if parallel == "fsdp" else ["--data_parallel", "ddp"]
    run = backend("--model", model, *FAST, "--dtype", "bfloat16", *flags, launcher=TORCHRUN,
                  timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    check_sequence_results(run.values, model, 128, replicas=2)
    assert run.counts["results.throughput"] == 1  # rank 0 reports for the job
    assert run.stdout.count(f"data_parallel={parallel}") == 2


@pytest.mark.parametrize(("flags", "fragments"), [
    (["--model", "llama3_debug", "--seq_len", "513"],
     ["--seq_len 513: llama3_debug takes at most 512 tokens (its published context)"]),
    (["--model", "resnet18", "--seq_len", "128"],
     ["--seq_len applies to transformers", "resnet18 is not one"]),
    (["--model", "deep_mnist", "--activation_checkpointing", "full"],
     ["--activation_checkpointing applies to transformers"]),
    (["--model", "resnet18", "--data_parallel", "fsdp"],
     ["--data_parallel fsdp applies to transformers"]),
    (["--model", "gpt2_debug", "--data_dir", "/data"],
     ["--data_dir: gpt2_debug trains on synthetic token ids"]),
    (["--model", "llama3_debug", "--num_classes", "7"], ["llama3_debug has 512 classes only"]),
])
def test_what_does_not_apply_is_one_line(backend, flags, fragments):
    assert_refused(backend(*FAST, *flags), *fragments)
