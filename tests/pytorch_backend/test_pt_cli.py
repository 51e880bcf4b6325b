"""Flags: booleans, dtypes, checks; every bad input is a clear failure, never a traceback only."""

from __future__ import annotations

import argparse

import pytest
from pytorch_benchmarks.cli import FlagError, parse_bool, parse_dtype, parse_options

pytestmark = pytest.mark.pytorch


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("yes", True),
        ("on", True),
        ("1", True),
        ("false", False),
        ("No", False),
        ("off", False),
        ("0", False),
    ],
)
def test_parse_bool(text, expected):
    assert parse_bool(text) is expected


def test_parse_bool_refuses_other_words():
    with pytest.raises(argparse.ArgumentTypeError, match="boolean"):
        parse_bool("maybe")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("float", "float32"),
        ("float32", "float32"),
        ("float16", "float16"),
        ("bfloat16", "bfloat16"),
    ],
)
def test_parse_dtype(text, expected):
    assert parse_dtype(text) == expected


def test_bare_bool_flag_means_true_and_values_are_read():
    opts = parse_options(["--model", "resnet50", "--forward_only", "--channels_last", "off"])
    assert opts.forward_only is True
    assert opts.channels_last is False
    opts = parse_options(["--model", "resnet50", "--forward_only=no", "--data_shuffle", "yes"])
    assert opts.forward_only is False and opts.data_shuffle is True


def test_defaults_follow_dlbs():
    opts = parse_options(["--model", "resnet50"])
    assert (opts.cudnn_benchmark, opts.cudnn_fastest, opts.data_shuffle) == (True, False, False)
    assert (opts.num_loader_threads, opts.data_backend, opts.dtype) == (4, "caffe_lmdb", "float32")


def test_fast_defaults_and_the_new_flags():
    opts = parse_options(["--model", "resnet50"])
    assert (opts.channels_last, opts.optimizer, opts.optimizer_impl) == ("auto", "sgd", "fused")
    assert (opts.decode, opts.inductor_options, opts.cuda_graphs) == ("cpu", [], False)
    opts = parse_options(["--model", "resnet50", "--channels_last", "AUTO", "--compile",
                          "--inductor_options", "coordinate_descent_tuning=true",
                          "max_autotune_conv_backends=ATEN", "epilogue_fusion=0", "x.y=0.5",
                          "--optimizer", "lars", "--optimizer_impl", "foreach", "--cuda_graphs",
                          "--dtype", "bfloat16"])
    assert opts.channels_last == "auto" and opts.cuda_graphs and not opts.forward_only
    assert opts.inductor_options == [("coordinate_descent_tuning", True),
                                     ("max_autotune_conv_backends", "ATEN"),
                                     ("epilogue_fusion", 0), ("x.y", 0.5)]
    assert (opts.optimizer, opts.optimizer_impl) == ("lars", "foreach")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--model", "m", "--dtype", "int8"], "unsupported dtype 'int8'"),
        (["--model", "m", "--forward_only", "maybe"], "boolean"),
        (["--model", "m", "--batch_size", "0"], "--batch_size must be >= 1"),
        (["--model", "m", "--num_batches", "0"], "--num_batches must be >= 1"),
        (["--model", "m", "--num_warmup_batches", "-1"], "--num_warmup_batches"),
        (["--model", "m", "--cuda_graphs", "--device", "cpu"], "--cuda_graphs needs --device gpu"),
        (["--model", "m", "--cuda_graphs", "--dtype", "float16", "--optimizer_impl", "foreach"],
         "needs --optimizer_impl fused"),
        (["--model", "m", "--inductor_options", "coordinate_descent_tuning=true"],
         "add --compile true"),
        (["--model", "m", "--compile", "--inductor_options", "novalue"], "NAME=VALUE"),
        (["--model", "m", "--decode", "gpu", "--device", "cpu"], "--decode gpu decodes on the GPU"),
        (["--model", "m", "--decode", "gpu", "--data_dir", "d"], "image_folder"),
        (["--model", "m", "--channels_last", "sometimes"], "boolean"),
        (["--model", "m", "--optimizer", "adam"], "invalid choice"),
        (["--model", "m", "--device", "tpu"], "invalid choice"),
        (["--batch_size", "2"], "--model"),
    ],
)
def test_bad_flags_raise_flag_error(argv, fragment):
    with pytest.raises(FlagError, match=None) as info:
        parse_options(argv)
    assert fragment in str(info.value)


# Bad input as a process sees it (exit status, one stderr line, failure keys): see
# test_pt_user_errors.py.
