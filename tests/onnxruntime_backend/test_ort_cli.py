"""The ONNX Runtime backend's command line: every bad flag is refused before anything loads."""

from __future__ import annotations

import pytest
from onnxruntime_benchmarks.options import parse_options
from ort_helpers import CPU


@pytest.mark.parametrize("args, message", [
    (["--model", "resnet50", "--device", "cpu"], "runs inference only"),
    (["--model", "resnet50", *CPU, "--dtype", "bfloat16"], "numpy has no bfloat16"),
    (["--model", "resnet50", *CPU, "--dtype", "int8"], "unsupported dtype 'int8'"),
    (["--model", "resnet50", *CPU, "--graph_optimization_level", "max"], "invalid choice"),
    (["--model", "resnet50", *CPU, "--execution_provider", "cuda"], "needs --device gpu"),
    (["--model", "resnet50", "--forward_only", "--device", "gpu", "--execution_provider", "cpu"],
     "needs --execution_provider cuda or tensorrt"),
    (["--model", "resnet50", "--forward_only", "--device", "gpu", "--num_gpus", "2",
      "--execution_provider", "cuda"], "one session on one GPU"),
    (["--model", "resnet50", *CPU, "--inter_op_threads", "2"], "--execution_mode parallel"),
    (["--model", "resnet50", *CPU, "--data_dir", "/data"], "synthetic data only"),
    (["--model", "resnet50", *CPU, "--batch_size", "0"], "--batch_size must be at least 1"),
    (["--model", "resnet50", *CPU, "--model_file", "m.pt"], "expected a .onnx file"),
    (["--model", "resnet50", *CPU, "--allow_spinning", "maybe"], "expected a boolean"),
])
def test_bad_flags_fail_in_one_line_with_the_protocols_failure_keys(backend, args, message):
    run = backend(*args)
    assert run.returncode == 2
    assert run.values["results.status"] == "failure"
    assert message in run.values["results.status_msg"]
    assert "results.time" not in run.values and "results.throughput" not in run.values
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchmarks.py: error: bad flag: ")


def test_num_threads_is_the_protocols_name_of_intra_op_threads():
    opts = parse_options(["--model", "m", "--forward_only", "--device", "cpu",
                          "--num_threads", "3"])
    assert opts.intra_op_threads == 3
    opts = parse_options(["--model", "m", "--forward_only", "--device", "cpu",
                          "--intra_op_threads", "2", "--inter_op_threads", "1",
                          "--execution_mode", "parallel", "--allow_spinning=off"])
    assert (opts.intra_op_threads, opts.inter_op_threads, opts.allow_spinning) == (2, 1, False)


def test_float_is_float32():
    opts = parse_options(["--model", "m", "--forward_only", "--device", "cpu",
                          "--dtype", "float"])
    assert opts.dtype == "float32"
