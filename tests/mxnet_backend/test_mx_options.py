"""The backend's command line: booleans, choices and the errors for bad values."""

from __future__ import annotations

import pytest
from mxnet_benchmarks.errors import BenchmarkError
from mxnet_benchmarks.options import parse_options

pytestmark = pytest.mark.mxnet

BASE = ["--model", "resnet50", "--device", "cpu"]


@pytest.mark.parametrize(("text", "expected"), [
    ("true", True), ("True", True), ("yes", True), ("on", True), ("1", True),
    ("false", False), ("FALSE", False), ("no", False), ("off", False), ("0", False),
])
def test_booleans_accept_every_spelling(text, expected):
    assert parse_options(BASE + ["--forward_only", text]).forward_only is expected
    assert parse_options(BASE + [f"--forward_only={text}"]).forward_only is expected


def test_bare_flag_means_true_and_absence_the_default():
    assert parse_options(BASE + ["--forward_only"]).forward_only is True
    assert parse_options(BASE).forward_only is False
    assert parse_options(BASE + ["--hybridize", "no"]).hybridize is False
    assert parse_options(BASE).hybridize is True


def test_defaults_and_values():
    opts = parse_options(BASE + ["--batch_size", "8", "--num_warmup_batches", "0",
                                 "--kv_store", "dist_device_sync", "--data_dir", "/data"])
    assert (opts.batch_size, opts.num_warmup_batches, opts.num_batches) == (8, 0, 10)
    assert opts.kv_store == "dist_device_sync" and opts.is_distributed
    assert opts.data_dir == "/data" and opts.dtype == "float32"
    assert not parse_options(BASE + ["--kv_store", "device"]).is_distributed


@pytest.mark.parametrize(("flags", "message"), [
    (["--dtype", "bfloat16"], "unknown dtype 'bfloat16'; choose one of: float32, float16"),
    (["--kv_store", "nccl"], "unknown kv_store 'nccl'; choose one of: local, device, dist_sync"),
    (["--device", "tpu"], "unknown device 'tpu'"),
    (["--graph_backend", "tensorrt", "--forward_only"], "unknown graph_backend 'tensorrt'"),
    (["--graph_backend", "onednn"], "inference only"),
    (["--graph_backend", "onednn", "--forward_only", "--hybridize", "false"],
     "needs --hybridize true"),
    (["--dtype", "float16"], "float16 needs --device gpu"),
    (["--batch_size", "0"], "--batch_size must be at least 1"),
    (["--cpu_contexts", "0"], "--cpu_contexts must be at least 1"),
    (["--num_warmup_batches", "-1"], "--num_warmup_batches must not be negative"),
    (["--forward_only", "maybe"], "expected a boolean (true/false/yes/no/on/off/1/0/t/f/y/n), "
     "got 'maybe'"),
    (["--batch_size", "lots"], "invalid int value"),
])
def test_bad_values_are_clear_errors(flags, message):
    with pytest.raises(BenchmarkError) as error:
        parse_options(BASE + flags)
    assert message in str(error.value)


def test_model_is_required():
    with pytest.raises(BenchmarkError, match="--model"):
        parse_options(["--device", "cpu"])


def test_float16_is_accepted_for_gpus():
    opts = parse_options(["--model", "resnet50", "--device", "gpu", "--num_gpus", "4",
                          "--dtype", "float16"])
    assert (opts.dtype, opts.num_gpus) == ("float16", 4)
