"""Every model of docs/backends/protocol.md section 2 builds: input shape, classes, parameters."""

from __future__ import annotations

import pytest
import torch
from pytorch_benchmarks.models import (  # noqa: E402
    UnknownModelError,
    get_model_spec,
    model_ids,
    register_model,
)

pytestmark = pytest.mark.pytorch

# docs/backends/protocol.md section 2, minus the MXNet-only ids (inception_resnet_v2,
# deep_speech2).
TABLE = {
    "deep_mnist": ((784,), 10),
    "sensor_net": ((784,), 16),
    "acoustic_model": ((540,), 8192),
    "alexnet": ((3, 227, 227), 1000),
    "alexnet_owt": ((3, 227, 227), 1000),
    "overfeat": ((3, 231, 231), 1000),
    "googlenet": ((3, 224, 224), 1000),
    **{f"vgg{d}": ((3, 224, 224), 1000) for d in (11, 13, 16, 19)},
    **{f"resnet{d}": ((3, 224, 224), 1000) for d in (18, 34, 50, 101, 152, 200, 269)},
    "inception3": ((3, 299, 299), 1000),
    "inception4": ((3, 299, 299), 1000),
}

# The reference counts of docs/backends/protocol.md section 2, plus the counts of the other
# architectures as built here (each checked against its paper's or torchvision's published
# figure where one exists).
PARAMETERS = {
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "vgg16": 138_357_544,
    "alexnet_owt": 61_100_840,
    "inception3": 23_834_568,
    "googlenet": 6_998_552,
    "resnet34": 21_797_672,
    "resnet101": 44_549_160,
    "resnet152": 60_192_808,
    "resnet200": 64_673_832,
    "resnet269": 102_073_384,
    "vgg11": 132_863_336,
    "vgg13": 133_047_848,
    "vgg19": 143_667_240,
    "inception4": 42_679_816,
    "alexnet": 62_378_344,
    "overfeat": 145_920_872,
    "deep_mnist": 11_972_510,
    "sensor_net": 2_919_440,
    "acoustic_model": 34_678_784,
}


def test_every_table_id_is_registered():
    assert set(TABLE) <= set(model_ids())


@pytest.mark.parametrize("model_id", sorted(TABLE))
def test_model_shape_and_parameters(model_id):
    """Built on the meta device: shapes and counts without allocating or computing."""
    spec = get_model_spec(model_id)
    shape, classes = TABLE[model_id]
    assert spec.input_shape == shape
    assert spec.num_classes == classes
    assert spec.title
    with torch.device("meta"):
        model = spec.build()
        output = model.eval()(torch.empty(2, *shape))
    assert tuple(output.shape) == (2, classes)
    assert sum(p.numel() for p in model.parameters()) == PARAMETERS[model_id]


@pytest.mark.parametrize("model_id", ["deep_mnist", "sensor_net", "acoustic_model"])
def test_small_models_compute_finite_outputs(model_id):
    spec = get_model_spec(model_id)
    torch.manual_seed(0)
    output = spec.build().eval()(torch.randn(3, *spec.input_shape))
    assert output.shape == (3, spec.num_classes)
    assert torch.isfinite(output).all()


def test_unknown_model_lists_the_known_ids():
    with pytest.raises(UnknownModelError) as info:
        get_model_spec("resnet51")
    message = str(info.value)
    assert "'resnet51'" in message
    assert "resnet50" in message and "googlenet" in message


def test_duplicate_registration_raises():
    model_ids()  # make sure the built-ins are loaded
    with pytest.raises(ValueError, match="registered twice"):
        register_model("resnet50", title="x", input_shape=(1,), num_classes=1)(lambda: None)
