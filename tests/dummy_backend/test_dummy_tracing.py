"""The dummy backend's synthetic trace: what the engine's side is tested with (docs/tracing.md)."""

from __future__ import annotations

import pytest
from test_dummy_backend import FAST, run_dummy

from tests.tracing.trace_checks import check_layer_nesting, check_views_agree, load, spans


def traced(tmp_path, level: str, *extra: str):
    path = tmp_path / f"{level}.trace.json.gz"
    run = run_dummy(*FAST, "--trace_level", level, "--trace_batches", "3", "--trace_file",
                    str(path), *extra)
    assert run.returncode == 0, run.stderr
    assert run.values["results.trace_file"] == str(path)
    assert run.values["results.status"] == "ok"
    assert len(run.values["results.time_data"]) == 4  # the traced batches are not timed
    return load(path), path


@pytest.mark.parametrize("level", ["step", "layer", "operator", "full"])
def test_each_level_writes_a_valid_trace_the_views_agree_with(tmp_path, level):
    document, path = traced(tmp_path, level)
    assert document["dlbs"]["trace_level"] == level
    assert len(spans(document, "dlbs.step")) == 3
    assert bool(spans(document, "dlbs.layer")) == (level != "step")
    assert bool(spans(document, "cpu_op")) == (level in ("operator", "full"))
    assert not spans(document, "kernel")  # a CPU run has no kernels
    if level != "step":
        check_layer_nesting(document)
    check_views_agree(path, document)


def test_kernel_level_on_a_gpu_ties_kernels_to_layers(tmp_path):
    document, _ = traced(tmp_path, "kernel", "--device", "gpu", "--num_gpus", "1")
    kernels = spans(document, "kernel")
    layers = {span["name"] for span in spans(document, "dlbs.layer")}
    assert kernels and all(kernel["args"]["dlbs.layer"] in layers for kernel in kernels)
    assert {kernel["args"]["dlbs.phase"] for kernel in kernels} == {"forward", "backward"}


def test_inference_has_no_backward(tmp_path):
    document, _ = traced(tmp_path, "layer", "--forward_only")
    assert {span["name"] for span in spans(document, "dlbs.phase")} == {"data_wait", "forward"}


@pytest.mark.parametrize("flags, message", [
    (["--trace_level", "kernel", "--trace_file", "t.json.gz"], "needs --device gpu"),
    (["--trace_level", "layer"], "needs --trace_file"),
    (["--trace_level", "layer", "--trace_file", "t.json.gz", "--trace_batches", "0"],
     "--trace_batches must be >= 1"),
    (["--trace_level", "everything"], "expected one of none, step"),
])
def test_bad_trace_flags_are_a_bad_command_line(flags, message):
    run = run_dummy(*FAST, *flags)
    assert run.returncode == 2
    assert message in run.values["results.status_msg"]


def test_a_trace_that_cannot_be_written_keeps_the_timed_results(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    run = run_dummy(*FAST, "--trace_level", "step", "--trace_file",
                    str(blocker / "t.json.gz"))
    assert run.returncode == 0
    assert run.values["results.status"] == "ok" and run.values["results.time"] > 0
    assert "cannot write the trace" in run.values["results.trace_error"]
    assert "results.trace_file" not in run.values
