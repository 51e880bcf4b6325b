"""--num_classes: MXNet registry models of another class count, and weights that say so."""

from __future__ import annotations

import mxnet as mx
import pytest
from mxnet_benchmarks.errors import BenchmarkError
from mxnet_benchmarks.models import create_model
from mxnet_benchmarks.options import parse_options
from mxnet_benchmarks.runner import load_weights

pytestmark = pytest.mark.mxnet


@pytest.mark.parametrize("model_id", ["resnet18", "vgg11", "alexnet", "deep_mnist"])
def test_a_registry_model_takes_another_class_count(model_id):
    model = create_model(model_id, 7)
    assert model.num_classes == 7 and create_model(model_id).num_classes != 7
    net = model.build()
    net.initialize()
    net.hybridize()
    _, (output,), _ = net(mx.sym.var("data")).infer_shape(data=(2, *model.input_shape))
    assert output == (2, 7)


def test_the_flag_is_parsed():
    base = ["--model", "resnet18", "--device", "cpu"]
    assert parse_options(base).num_classes == 0
    assert parse_options([*base, "--num_classes", "10"]).num_classes == 10
    with pytest.raises(BenchmarkError, match="expected a number of classes"):
        parse_options([*base, "--num_classes", "ten"])


def test_weights_of_another_class_count_name_exp_num_classes(tmp_path):
    path = str(tmp_path / "resnet18_10.params")
    ten = create_model("resnet18", 10)
    net = ten.build()
    net.initialize()
    net(mx.nd.zeros((1, *ten.input_shape)))
    net.save_parameters(path)
    thousand = create_model("resnet18")
    net = thousand.build()
    net.initialize(ctx=[mx.cpu()])
    with pytest.raises(BenchmarkError) as info:
        load_weights(net, path, thousand, [mx.cpu()])
    assert "shape incompatible" in str(info.value)
    assert str(info.value).endswith("the weights have 10 classes, the model 1000: set "
                                    "exp.num_classes to 10 (the backend's --num_classes 10)")
    net = ten.build()
    net.initialize(ctx=[mx.cpu()])
    load_weights(net, path, ten, [mx.cpu()])
