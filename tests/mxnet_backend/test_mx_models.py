"""Every model of docs/backends/protocol.md section 2 builds, with its input and output shapes."""

from __future__ import annotations

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd
from mxnet_benchmarks.errors import BenchmarkError
from mxnet_benchmarks.models import create_model, model_ids, register_model
from mxnet_benchmarks.models.deep_speech2 import DeepSpeech2
from mxnet_benchmarks.models.registry import Model

pytestmark = pytest.mark.mxnet

IMAGE_224 = (3, 224, 224)
IMAGE_299 = (3, 299, 299)
# id -> (input shape without batch, classes): the table of docs/backends/protocol.md section 2.
CONTRACT = {
    "deep_mnist": ((784,), 10),
    "sensor_net": ((784,), 16),
    "acoustic_model": ((540,), 8192),
    "alexnet": ((3, 227, 227), 1000),
    "alexnet_owt": ((3, 227, 227), 1000),
    "overfeat": ((3, 231, 231), 1000),
    "googlenet": (IMAGE_224, 1000),
    **{f"vgg{depth}": (IMAGE_224, 1000) for depth in (11, 13, 16, 19)},
    **{f"resnet{depth}": (IMAGE_224, 1000) for depth in (18, 34, 50, 101, 152, 200, 269)},
    "inception3": (IMAGE_299, 1000),
    "inception4": (IMAGE_299, 1000),
    "inception_resnet_v2": (IMAGE_299, 1000),
    "deep_speech2": ((1, 200, 161), 842),
}
# The reference parameter counts of docs/backends/protocol.md section 2 (torchvision / BVLC).
PARAMETERS = {
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "vgg16": 138_357_544,
    "alexnet_owt": 61_100_840,
    "inception3": 23_834_568,
    "googlenet": 6_998_552,
}


def symbolic_shapes(model: Model, batch: int) -> tuple[tuple[int, ...], int]:
    """Output shape and trainable parameter count, by MXNet's shape inference."""
    net = model.build()
    net.initialize()
    net.hybridize()
    symbol = net(mx.sym.var("data"))
    arg_shapes, out_shapes, _ = symbol.infer_shape(data=(batch,) + model.input_shape)
    params = sum(int(np.prod(shape)) for name, shape in zip(symbol.list_arguments(), arg_shapes)
                 if name != "data")
    return out_shapes[0], params


def test_registry_holds_exactly_the_contract_ids():
    # Only the ids the package's own model files register: a test in the same worker may
    # have loaded an --extra_models file (tests/evaluation registers tiny models) first.
    own = {model_id for model_id in model_ids()
           if type(create_model(model_id)).__module__.startswith("mxnet_benchmarks.models.")}
    assert own == set(CONTRACT)


@pytest.mark.parametrize("model_id", sorted(CONTRACT))
def test_model_builds_with_contract_shapes(model_id):
    model = create_model(model_id)
    input_shape, classes = CONTRACT[model_id]
    assert model.input_shape == input_shape
    assert model.num_classes == classes
    assert model.title
    output_shape, _ = symbolic_shapes(model, batch=2)
    assert output_shape == model.output_shape(2)
    assert output_shape[0] == 2 and output_shape[-1] == classes


@pytest.mark.parametrize("model_id", sorted(PARAMETERS))
def test_parameter_count_matches_reference(model_id):
    _, params = symbolic_shapes(create_model(model_id), batch=1)
    assert params == PARAMETERS[model_id]


@pytest.mark.parametrize("model_id", ["deep_mnist", "sensor_net", "acoustic_model", "resnet18",
                                      "googlenet", "alexnet_owt"])
def test_forward_pass_computes_finite_logits(model_id):
    model = create_model(model_id)
    net = model.build()
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    out = net(mx.nd.random.normal(shape=(2,) + model.input_shape))
    assert out.shape == model.output_shape(2)
    assert np.isfinite(out.asnumpy()).all()


def test_deep_speech2_trains_with_ctc_loss():
    # The same network with small RNNs, so one training step takes a fraction of a second.
    model = DeepSpeech2("deep_speech2", rnn_units=32, rnn_layers=2)
    net = model.build()
    net.initialize(mx.init.Xavier())
    net.hybridize()
    loss_fn = model.loss()
    rng = np.random.default_rng(0)
    data = mx.nd.array(rng.standard_normal((2,) + model.input_shape, dtype=np.float32))
    labels = mx.nd.array(model.synthetic_labels(2, rng))
    assert labels.asnumpy().max() < model.num_classes - 1  # the last class is the blank
    with autograd.record():
        out = net(data)
        loss = loss_fn(out, labels)
    loss.backward()
    assert out.shape == model.output_shape(2) == (2, 67, 842)
    assert loss.shape == (2,)
    assert np.isfinite(loss.asnumpy()).all() and (loss.asnumpy() > 0).all()
    conv_grad = net.convs[0].weight.grad().asnumpy()
    assert np.abs(conv_grad).sum() > 0
    rnn_grads = [p.grad().asnumpy() for name, p in net.rnn.collect_params().items()]
    assert all(np.abs(grad).sum() > 0 for grad in rnn_grads)


def test_unknown_model_error_lists_the_known_ids():
    with pytest.raises(BenchmarkError, match="unknown model 'resnet51'.*resnet50"):
        create_model("resnet51")


def test_registering_an_id_twice_raises():
    with pytest.raises(RuntimeError, match="registered twice"):
        register_model("resnet50")(type("Another", (Model,), {}))
