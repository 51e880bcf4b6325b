"""The PyTorch backend's traced pass on the CPU (docs/tracing.md): layer and operator levels."""

from __future__ import annotations

import json

import pytest
from pytorch_backend_helpers import run_backend

from dlbs.traces.reader import TraceFile
from dlbs.traces.views import view
from tests.tracing.trace_checks import check_layer_nesting, check_views_agree, load, spans

pytestmark = [pytest.mark.pytorch, pytest.mark.slow]

#: One timed batch of a small batch: the tests check the trace, not the speed.
FAST = ["--device", "cpu", "--batch_size", "2", "--num_batches", "2", "--num_warmup_batches",
        "1", "--num_threads", "2"]


def traced(tmp_path, model: str, level: str, *extra: str, batches: int = 2):
    path = tmp_path / f"{model}_{level}.trace.json.gz"
    run = run_backend("--model", model, *FAST, "--trace_level", level, "--trace_batches",
                      str(batches), "--trace_file", str(path), *extra)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.values["results.status"] == "ok"
    assert run.values["results.trace_file"] == str(path)
    # The traced batches are a pass of their own: the timed numbers hold the timed batches.
    assert len(run.values["results.time_data"]) == 2
    return run, load(path), path


@pytest.fixture(scope="module")
def resnet_layers(tmp_path_factory):
    return traced(tmp_path_factory.mktemp("layer"), "resnet18", "layer")


@pytest.fixture(scope="module")
def resnet_operators(tmp_path_factory):
    return traced(tmp_path_factory.mktemp("operator"), "resnet18", "operator")


def model_names(model_id: str) -> set[str]:
    """The names the trace must use: the model's own module names, the model as its id."""
    import torchvision  # here, not at the top: every pytest-xdist worker collects this file

    model = getattr(torchvision.models, model_id)(weights=None)
    return {name or model_id for name, _ in model.named_modules()}


def test_layer_trace_names_the_models_own_modules(resnet_layers):
    _, document, _ = resnet_layers
    names = {span["name"] for span in spans(document, "dlbs.layer")}
    assert {"conv1", "layer1", "layer2", "layer3", "layer4", "fc"} <= names
    assert names == model_names("resnet18")
    top = {span["name"] for span in spans(document, "dlbs.layer") if span["args"]["depth"] == 1}
    assert top == {"conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4",
                   "avgpool", "fc"}
    assert {span["args"]["type"] for span in spans(document, "dlbs.layer")} >= {
        "ResNet", "Conv2d", "BatchNorm2d", "Sequential", "BasicBlock", "Linear"}


def test_layer_trace_is_a_step_trace_without_operators(resnet_layers):
    _, document, _ = resnet_layers
    assert document["dlbs"]["trace_level"] == "layer"
    assert document["dlbs"]["layer_spans"] is True
    assert len(spans(document, "dlbs.step")) == 2
    phases = {span["name"] for span in spans(document, "dlbs.phase")}
    assert phases == {"data_wait", "forward", "backward", "optimizer"}
    assert not spans(document, "cpu_op")


def test_layer_times_nest(resnet_layers):
    check_layer_nesting(resnet_layers[1])


def test_views_agree_with_the_layer_trace(resnet_layers):
    _, document, path = resnet_layers
    check_views_agree(path, document)


def test_operator_trace_holds_operators_inside_layers(resnet_operators):
    _, document, path = resnet_operators
    assert document["dlbs"]["trace_level"] == "operator"
    operators = spans(document, "cpu_op")
    assert any(op["name"] == "aten::convolution" for op in operators)
    conv1 = [span for span in spans(document, "dlbs.layer") if span["name"] == "conv1"]
    assert len(conv1) == 2
    for span in conv1:  # the profiler's clock: the layer's operators lie inside its span
        inside = [op for op in operators if op["tid"] == span["tid"]
                  and span["ts"] <= op["ts"] <= span["ts"] + span["dur"]]
        assert any(op["name"] == "aten::conv2d" for op in inside)
    # torch's profiler schedule marks its own steps; the trace keeps dlbs's only.
    assert not [e for e in document["traceEvents"] if str(e.get("name")).startswith(
        "ProfilerStep#")]
    check_layer_nesting(document)
    check_views_agree(path, document)


# The tests below check what a trace level records, whatever the model: a small one.
def test_operator_trace_of_inference(tmp_path):
    _, document, path = traced(tmp_path, "deep_mnist", "operator", "--forward_only", "true",
                               batches=1)
    assert {span["name"] for span in spans(document, "dlbs.phase")} == {"data_wait", "forward"}
    assert spans(document, "cpu_op")
    check_views_agree(path, document)


def test_full_trace_records_shapes_and_memory(tmp_path):
    _, document, _ = traced(tmp_path, "deep_mnist", "full", batches=1)
    assert any("Input Dims" in op.get("args", {}) for op in spans(document, "cpu_op"))
    assert any(e.get("name") == "[memory]" for e in document["traceEvents"])


def test_step_trace_has_no_layers_and_the_views_say_so(tmp_path, dlbs_cli):
    _, document, path = traced(tmp_path, "deep_mnist", "step", batches=3)
    assert not spans(document, "dlbs.layer") and len(spans(document, "dlbs.step")) == 3
    shown = dlbs_cli("trace", str(path), "--view", "layers")
    assert shown.returncode == 0 and "no layer spans: this trace is at level step" in shown.stdout
    kernels = dlbs_cli("trace", str(path), "--view", "kernels", "--format", "json")
    assert json.loads(kernels.stdout)["rows"] == [] and "no kernels traced" in kernels.stderr


@pytest.mark.parametrize("flags, message", [
    (["--trace_level", "kernel", "--trace_file", "t.json.gz"], "needs --device gpu"),
    (["--trace_level", "layer"], "needs --trace_file"),
    (["--trace_level", "layer", "--trace_file", "t.json.gz", "--trace_batches", "0"],
     "--trace_batches must be >= 1"),
    (["--trace_level", "lines"], "invalid choice"),
])
def test_bad_trace_flags_are_refused_in_one_line(flags, message):
    run = run_backend("--model", "resnet18", "--device", "cpu", *flags)
    assert run.returncode == 2
    assert run.values["results.status"] == "failure"
    assert message in run.values["results.status_msg"]
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("level", ["step", "operator"])
def test_ddp_traces_on_rank_zero_only(tmp_path, level):
    """Every rank runs the traced batches (DDP's collectives need them all); rank 0 writes."""
    path = tmp_path / "ddp.trace.json.gz"
    run = run_backend("--model", "deep_mnist", "--device", "cpu", "--batch_size", "4",
                      "--num_batches", "2", "--num_warmup_batches", "1", "--trace_level",
                      level, "--trace_batches", "2", "--trace_file", str(path),
                      launcher=["-m", "torch.distributed.run", "--standalone",
                                "--nproc_per_node=2"], timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.counts["results.trace_file"] == 1
    document = load(path)
    assert len({(e["pid"]) for e in spans(document, "dlbs.step")}) == 1
    assert len(spans(document, "dlbs.step")) == 2
    assert document["dlbs"]["world_size"] == 2
    if level == "operator":  # DDP's all-reduce, as the process group records it
        collectives = [e for e in spans(document, "user_annotation")
                       if e["name"] == "gloo:all_reduce"]
        assert collectives
        summary = {row["category"]: row for row in view("summary", TraceFile(path)).rows}
        assert summary["communication"]["total_ms"] == pytest.approx(
            sum(e["dur"] for e in collectives) / 1000.0)
    assert [p.name for p in tmp_path.iterdir()] == ["ddp.trace.json.gz"]


def test_a_trace_that_cannot_be_written_keeps_the_timed_results(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    run = run_backend("--model", "deep_mnist", "--device", "cpu", "--batch_size", "2",
                      "--num_batches", "2", "--trace_level", "operator", "--trace_file",
                      str(blocker / "t.json.gz"))
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.values["results.status"] == "ok" and run.values["results.time"] > 0
    assert "cannot write the trace" in run.values["results.trace_error"]
    assert "results.trace_file" not in run.values
