"""A speed-up is never a different computation: graph backends agree with eager execution.

For the same weights and the same input, on the CPU in float32:
- ONNX Runtime at every graph optimisation level matches PyTorch eager on the model it was
  exported from;
- PyTorch compiled (with and without freezing, NCHW and channels-last) matches eager;
- MXNet hybridized, static and static + oneDNN fusion match imperative execution.
Each goes through the backends' own code (their options, model builders, sessions).

Tolerance: every output within `TOLERANCE` x the largest magnitude of the reference output
(plus a tiny absolute floor); fusions and other kernels reorder float32 sums, so bit equality
is not expected. The largest difference seen here was about 1e-6 of the output's magnitude.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))

TOLERANCE = 1e-4
ORT_LEVELS = ("disabled", "basic", "extended", "layout", "all")


def assert_agree(result: np.ndarray, reference: np.ndarray, what: str) -> None:
    scale = float(np.abs(reference).max())
    difference = float(np.abs(result.astype(np.float64) - reference).max())
    assert result.shape == reference.shape, what
    assert difference <= TOLERANCE * scale + 1e-9, \
        f"{what}: largest difference {difference:.3g}, output magnitude {scale:.3g}"


# -- ONNX Runtime vs PyTorch eager --------------------------------------------------------

@pytest.mark.onnxruntime
@pytest.mark.pytorch
@pytest.mark.slow
@pytest.mark.parametrize("model_id", ["sensor_net", "resnet18", "googlenet"])
def test_onnxruntime_at_every_level_matches_pytorch_eager(model_id, tmp_path):
    import torch
    from onnxruntime_benchmarks.models import resolve_model
    from onnxruntime_benchmarks.options import parse_options
    from onnxruntime_benchmarks.session import make_session, outputs, synthetic_feeds
    from pytorch_benchmarks.models import get_model_spec

    argv = ["--model", model_id, "--forward_only", "--device", "cpu", "--batch_size", "2",
            "--num_threads", "1", "--cache_dir", str(tmp_path), "--seed", "3"]
    model_file = resolve_model(parse_options(argv), argv)
    torch.manual_seed(3)  # the export's seed: the same weights
    eager = get_model_spec(model_id).build().eval()
    feeds = None
    for level in ORT_LEVELS:
        opts = parse_options([*argv, "--graph_optimization_level", level])
        session = make_session(opts, model_file)
        feeds = feeds or synthetic_feeds(session, opts)
        (result,) = outputs(session, feeds)
        with torch.inference_mode():
            reference = eager(torch.from_numpy(next(iter(feeds.values())))).numpy()
        assert_agree(result, reference, f"{model_id} at level {level}")


# -- PyTorch compiled vs eager ------------------------------------------------------------

TINY_CNN = "graph_backends_tiny_cnn"


def _register_tiny_cnn():
    import torch.nn as nn
    from pytorch_benchmarks.models import model_ids, register_model

    if TINY_CNN in model_ids():
        return

    class Residual(nn.Module):
        def __init__(self, channels: int) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1),
                                      nn.BatchNorm2d(channels), nn.ReLU(),
                                      nn.Conv2d(channels, channels, 3, padding=1),
                                      nn.BatchNorm2d(channels))

        def forward(self, x):
            return (x + self.body(x)).relu()

    @register_model(TINY_CNN, title="TinyCNN", input_shape=(3, 32, 32), num_classes=10)
    def tiny_cnn():
        return nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16),
                             nn.ReLU(), Residual(16), nn.MaxPool2d(2), Residual(16),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


@pytest.mark.pytorch
@pytest.mark.slow
@pytest.mark.parametrize("flags", [
    ["--channels_last"],
    ["--compile"],
    ["--compile", "--freezing"],
    ["--compile", "--freezing", "--channels_last"],
], ids=lambda flags: "+".join(f.strip("-") for f in flags))
def test_pytorch_compiled_matches_eager(flags):
    import torch
    from pytorch_benchmarks.cli import parse_options
    from pytorch_benchmarks.models import get_model_spec
    from pytorch_benchmarks.runner import build_model, compile_mode, memory_format_for

    _register_tiny_cnn()
    spec = get_model_spec(TINY_CNN)
    base = ["--model", TINY_CNN, "--forward_only", "--device", "cpu", "--batch_size", "4"]
    device = torch.device("cpu")
    example = torch.randn(4, *spec.input_shape, generator=torch.Generator().manual_seed(1))

    def forward(argv: list[str]) -> np.ndarray:
        opts = parse_options(argv)
        memory_format = memory_format_for(spec, opts)
        torch.manual_seed(0)
        model = build_model(spec, opts, device, torch.float32, memory_format)
        if opts.compile:
            if opts.freezing:
                import torch._inductor.config as inductor_config

                inductor_config.freezing = True
            model = torch.compile(model, mode=compile_mode(opts))
        try:
            with torch.inference_mode():
                return model(example.to(memory_format=memory_format)).numpy()
        finally:
            torch._dynamo.reset()
            if opts.freezing:
                inductor_config.freezing = False

    assert_agree(forward([*base, *flags]), forward(base), f"pytorch {' '.join(flags)}")


# -- MXNet graph modes vs imperative ------------------------------------------------------

@pytest.mark.mxnet
@pytest.mark.slow
@pytest.mark.parametrize("model_id", ["resnet18", "googlenet"])
def test_mxnet_static_and_onednn_match_imperative(model_id, tmp_path):
    import mxnet as mx
    from mxnet_benchmarks.models import create_model
    from mxnet_benchmarks.options import parse_options
    from mxnet_benchmarks.runner import build_network

    model = create_model(model_id)
    data = np.random.default_rng(5).standard_normal((2, *model.input_shape)).astype(np.float32)
    base = ["--model", model_id, "--forward_only", "--device", "cpu", "--batch_size", "2"]
    weights = tmp_path / "weights.params"

    def forward(flags: list[str]) -> np.ndarray:
        opts = parse_options([*base, *flags])
        mx.random.seed(opts.seed)
        net = build_network(model, opts, [mx.cpu()])
        if weights.exists():
            # Gluon initialises deferred parameters in the order it first meets them, which
            # differs between imperative and hybridized execution: the same seed does not
            # give the same weights, so every network loads the reference's.
            net.load_parameters(str(weights), ctx=mx.cpu())
        result = net(mx.nd.array(data)).asnumpy()
        mx.nd.waitall()
        if not weights.exists():
            net.save_parameters(str(weights))
        return result

    reference = forward(["--hybridize", "false"])
    for flags in (["--static_graph", "false"], [], ["--graph_backend", "onednn"]):
        assert_agree(forward(flags), reference, f"mxnet {model_id} {' '.join(flags) or 'static'}")
