"""The MXNet backend's traced pass on the CPU (docs/tracing.md): layer and operator levels."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from mx_helpers import BENCHMARKS, PYTHON_DIR, backend_env, run_process

from tests.tracing.trace_checks import check_layer_nesting, check_views_agree, load, spans

pytestmark = [pytest.mark.mxnet, pytest.mark.slow]

FAST = ["--device", "cpu", "--batch_size", "2", "--num_batches", "2", "--num_warmup_batches",
        "1", "--num_threads", "2"]

#: The names of every block of a freshly built network, as the backend's process names them
#: (Gluon numbers its blocks per process, so they are read in a process of their own).
BLOCK_NAMES = """
import json, sys, warnings
warnings.filterwarnings("ignore")
from mxnet_benchmarks.models import create_model
net = create_model(sys.argv[1]).build()
found = []
net.apply(found.append)
print(json.dumps({"root": net.name, "names": [block.name for block in found],
                  "params": sorted(net.collect_params().keys())}))
"""


def block_names(model: str) -> dict:
    done = subprocess.run([sys.executable, "-c", BLOCK_NAMES, model], capture_output=True,
                          text=True, env=backend_env(), cwd=PYTHON_DIR, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def traced(tmp_path, level: str, *extra: str, batches: int = 2):
    path = tmp_path / f"resnet18_{level}.trace.json.gz"
    run = run_process([sys.executable, str(BENCHMARKS), "--model", "resnet18", *FAST,
                       "--trace_level", level, "--trace_batches", str(batches), "--trace_file",
                       str(path), *extra], timeout=400)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.values["results.status"] == "ok"
    assert run.values["results.trace_file"] == str(path)
    assert len(run.values["results.time_data"]) == 2  # the traced batches are not timed
    return run, load(path), path


@pytest.fixture(scope="module")
def imperative_operators(tmp_path_factory):
    """Operators and block spans: an imperative (not hybridized) network."""
    return traced(tmp_path_factory.mktemp("operator"), "operator", "--hybridize", "false")


def test_layer_trace_names_the_networks_own_blocks(tmp_path):
    _, document, path = traced(tmp_path, "layer", "--hybridize", "false")
    expected = block_names("resnet18")
    layers = spans(document, "dlbs.layer")
    assert {span["name"] for span in layers} == set(expected["names"])
    roots = {span["name"] for span in layers if span["args"]["depth"] == 0}
    assert roots == {expected["root"]}
    assert {span["args"]["type"] for span in layers} >= {"HybridSequential", "Conv2D",
                                                          "BatchNorm", "Dense", "_Block"}
    assert not spans(document, "operator")
    check_layer_nesting(document)
    check_views_agree(path, document)


def test_operator_trace_puts_operators_inside_their_blocks(imperative_operators):
    _, document, path = imperative_operators
    operators = spans(document, "operator")
    assert any(op["name"] == "Convolution" for op in operators)
    first_conv = block_names("resnet18")["names"][0]  # Block.apply visits leaves first
    convs = [span for span in spans(document, "dlbs.layer") if span["name"] == first_conv]
    assert len(convs) == 2
    for span in convs:  # one clock: MXNet's operators run inside the block's span
        inside = [op for op in operators if span["ts"] <= op["ts"] and
                  op["ts"] + op["dur"] <= span["ts"] + span["dur"]]
        assert any(op["name"] == "Convolution" for op in inside), span
    phases = {span["name"] for span in spans(document, "dlbs.phase")}
    assert phases == {"data_wait", "forward", "backward", "optimizer"}
    check_layer_nesting(document)
    check_views_agree(path, document)


def test_operator_trace_of_a_hybridized_network_has_no_block_spans(tmp_path):
    _, document, path = traced(tmp_path, "operator", "--hybridize", "true", batches=1)
    assert document["dlbs"]["layer_spans"] is False
    assert not spans(document, "dlbs.layer") and spans(document, "operator")
    ids = [e[key] for e in document["traceEvents"] for key in ("pid", "tid") if key in e]
    assert all(abs(value) < 2**31 for value in ids if isinstance(value, int))
    check_views_agree(path, document)


def test_full_trace_records_memory(tmp_path):
    _, document, _ = traced(tmp_path, "full", "--hybridize", "false", "--forward_only",
                            batches=1)
    assert any(e.get("ph") == "C" and str(e.get("name", "")).startswith("Memory")
               for e in document["traceEvents"])


def test_tracing_keeps_parameter_names_and_saved_weights_loading(tmp_path):
    """Hooks, not wrappers: the network's parameters keep their names, so weights load."""
    import mxnet as mx
    from mxnet_benchmarks import tracing
    from mxnet_benchmarks.models import create_model

    net = create_model("resnet18").build()
    net.initialize(mx.init.Xavier())
    batch = mx.nd.ones((1, 3, 224, 224))
    net(batch)  # Gluon creates the parameters on the first call
    before = sorted(net.collect_params().keys())
    saved = tmp_path / "before.params"
    net.save_parameters(str(saved))
    recorded = tracing._Spans(records=True)
    handles = tracing._add_layer_hooks(net, recorded)
    net(batch)
    for handle in handles:
        handle.detach()
    assert sorted(net.collect_params().keys()) == before
    assert net.name in {event["name"] for event in recorded.events}
    net.load_parameters(str(saved))
    recorded.events.clear()
    net(batch)
    assert not recorded.events  # the hooks are gone


@pytest.mark.parametrize("flags, message", [
    (["--trace_level", "layer", "--trace_file", "t.json.gz"], "add --hybridize false"),
    (["--trace_level", "kernel", "--trace_file", "t.json.gz"], "needs --device gpu"),
    (["--trace_level", "operator"], "needs --trace_file"),
    (["--trace_level", "lines", "--trace_file", "t.json.gz"], "unknown trace_level"),
])
def test_bad_trace_flags_are_refused_in_one_line(flags, message):
    run = run_process([sys.executable, str(BENCHMARKS), "--model", "resnet18", "--device",
                       "cpu", *flags], timeout=120)
    assert run.returncode == 2
    assert message in run.values["results.status_msg"]
    assert "Traceback" not in run.stderr


def test_a_trace_that_cannot_be_written_keeps_the_timed_results(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    run = run_process([sys.executable, str(BENCHMARKS), "--model", "deep_mnist", *FAST,
                       "--trace_level", "operator", "--trace_file", str(blocker / "t.json.gz")],
                      timeout=200)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.values["results.status"] == "ok" and run.values["results.time"] > 0
    assert "cannot write the trace" in run.values["results.trace_error"]
    assert "results.trace_file" not in run.values
