"""The PyTorch trace's post-processing on events shaped as torch.profiler exports them.

No GPU here: the kernel events are written by hand in the shape the profiler gives them
(a `cuda_runtime` launch and a `kernel` sharing a `correlation` id; autograd's backward
operators carrying the forward operator's `Sequence number`), and checked to land on the
layer, operator and phase that launched them. Standard library only (no torch needed).
"""

from __future__ import annotations

import gzip
import json

from pytorch_backend_helpers import PYTHON_DIR  # noqa: F401 - puts the backend on sys.path
from pytorch_benchmarks.trace_file import finish_events, span_label, write_trace

MAIN, AUTOGRAD = 10, 11


def x(cat, name, ts, dur, tid=MAIN, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid,
            "args": args}


def annotation(category, name, ts, dur, tid=MAIN):
    return x("user_annotation", span_label(category, name), ts, dur, tid)


def one_step():
    """A step: forward through model > block > conv, backward on autograd's thread."""
    return [
        annotation("dlbs.step", "step", 0.0, 100.0),
        annotation("dlbs.phase", "forward", 1.0, 40.0),
        annotation("dlbs.layer", "model", 2.0, 38.0),
        annotation("dlbs.layer", "block", 3.0, 30.0),
        annotation("dlbs.layer", "block.conv", 4.0, 20.0),
        x("cpu_op", "aten::conv2d", 5.0, 15.0, **{"Sequence number": 7}),
        x("cpu_op", "aten::cudnn_convolution", 6.0, 10.0),
        x("cuda_runtime", "cudaLaunchKernel", 7.0, 2.0, correlation=101),
        x("gpu_user_annotation", span_label("dlbs.layer", "block.conv"), 8.0, 30.0, tid=7),
        annotation("dlbs.phase", "backward", 50.0, 30.0),
        x("cpu_op", "autograd::engine::evaluate_function: ConvolutionBackward0", 55.0, 20.0,
          tid=AUTOGRAD, **{"Sequence number": 7, "Fwd thread id": 1}),
        x("cpu_op", "aten::convolution_backward", 56.0, 15.0, tid=AUTOGRAD),
        x("cuda_runtime", "cudaLaunchKernel", 57.0, 2.0, tid=AUTOGRAD, correlation=102),
        annotation("dlbs.phase", "optimizer", 85.0, 10.0),
        x("cpu_op", "aten::_fused_sgd_", 86.0, 5.0),
        x("cuda_runtime", "cudaLaunchKernel", 87.0, 1.0, correlation=103),
        x("user_annotation", "ProfilerStep#1", 0.0, 100.0),
        x("kernel", "sm90_xmma_fprop_implicit_gemm", 12.0, 20.0, tid=7, correlation=101),
        x("kernel", "sm90_xmma_wgrad", 60.0, 10.0, tid=7, correlation=102),
        x("kernel", "multi_tensor_apply_kernel", 90.0, 3.0, tid=7, correlation=103),
        x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0.5, 0.2, tid=8, correlation=999),
    ]


def by_name(events):
    """The events by name (the host's side of a span: GPU-side copies are left out)."""
    return {event["name"]: event for event in events if event["cat"] != "gpu_user_annotation"}


def test_spans_get_their_categories_and_nesting():
    events = by_name(finish_events(one_step(), {"block.conv": {"type": "Conv2d"}}))
    assert "ProfilerStep#1" not in events  # the profiler schedule's own step span goes
    assert events["step"]["cat"] == "dlbs.step" and events["step"]["args"]["batch"] == 0
    assert events["forward"]["cat"] == "dlbs.phase"
    conv = events["block.conv"]
    assert conv["cat"] == "dlbs.layer"
    assert conv["args"] == {"batch": 0, "parent": "block", "depth": 2, "type": "Conv2d"}
    assert events["model"]["args"]["parent"] == "" and events["model"]["args"]["depth"] == 0


def test_the_gpu_side_of_a_span_keeps_its_category():
    events = finish_events(one_step(), {})
    device = [e for e in events if e["cat"] == "gpu_user_annotation"]
    assert device[0]["name"] == "block.conv" and device[0]["args"]["dlbs.span"] == "dlbs.layer"


def test_kernels_name_the_layer_operator_and_phase_that_launched_them():
    events = by_name(finish_events(one_step(), {}))
    forward = events["sm90_xmma_fprop_implicit_gemm"]["args"]
    assert (forward["dlbs.layer"], forward["dlbs.operator"], forward["dlbs.phase"]) == (
        "block.conv", "aten::cudnn_convolution", "forward")
    # Backward: no layer span around the launch; the autograd node's sequence number names
    # the forward operator, and so its layer.
    backward = events["sm90_xmma_wgrad"]["args"]
    assert (backward["dlbs.layer"], backward["dlbs.operator"], backward["dlbs.phase"]) == (
        "block.conv", "aten::convolution_backward", "backward")
    optimizer = events["multi_tensor_apply_kernel"]["args"]
    assert (optimizer["dlbs.layer"], optimizer["dlbs.phase"]) == ("", "optimizer")
    copy = events["Memcpy HtoD (Pageable -> Device)"]["args"]
    assert copy["dlbs.layer"] == "" and copy["dlbs.operator"] == ""


def test_the_written_trace_is_json_with_the_metadata_first(tmp_path):
    path = tmp_path / "t.json.gz"
    write_trace(str(path), {"trace_level": "kernel"},
                [x("cpu_op", "a", 0.0, float("nan")), x("cpu_op", "b", 1.0, 2.0)])
    text = gzip.decompress(path.read_bytes()).decode()
    assert text.startswith('{"dlbs": {"format": 1, "trace_level": "kernel"}')
    document = json.loads(text)  # no NaN: it became null
    assert document["traceEvents"][0]["dur"] is None
    assert [p.name for p in tmp_path.iterdir()] == ["t.json.gz"]
