"""--num_classes: registry models of another class count, and weights that say which to set.

Issue 23 item 8: a 10-class resnet18's weights failed with a state-dict size mismatch and no
hint; a model file of your own (`--extra_models`) had no documented example.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from pytorch_backend_helpers import ROOT, run_backend
from pytorch_benchmarks.cli import FlagError, parse_options
from pytorch_benchmarks.errors import UserError
from pytorch_benchmarks.models import get_model_spec, register_model
from pytorch_benchmarks.weights import WeightsError, load_weights, other_class_count

pytestmark = pytest.mark.pytorch
CPU_INFERENCE = ["--device", "cpu", "--forward_only", "--batch_size", "1", "--num_batches", "1",
                 "--num_warmup_batches", "0"]


@pytest.fixture(scope="module")
def resnet18_10(tmp_path_factory) -> Path:
    """The state dict of a 10-class resnet18 (as torchvision builds it)."""
    import torchvision

    path = tmp_path_factory.mktemp("weights") / "resnet18_10.pt"
    torch.manual_seed(0)
    torch.save(torchvision.models.resnet18(weights=None, num_classes=10).state_dict(), path)
    return path


@pytest.mark.parametrize("model_id", ["resnet18", "vgg11", "alexnet", "googlenet",
                                      "inception4", "deep_mnist"])
def test_a_registry_model_takes_another_class_count(model_id):
    spec = get_model_spec(model_id, 7)
    assert spec.num_classes == 7 and get_model_spec(model_id).num_classes != 7
    with torch.device("meta"):
        output = spec.build().eval()(torch.empty(2, *spec.input_shape))
    assert tuple(output.shape) == (2, 7)


def test_zero_or_none_is_the_registered_count():
    assert get_model_spec("resnet18", 0) is get_model_spec("resnet18")
    assert get_model_spec("resnet18", None).num_classes == 1000


def test_a_builder_without_the_argument_keeps_its_count():
    @register_model("fixed_three_test", title="FixedThree", input_shape=(4,), num_classes=3)
    def fixed_three():
        return torch.nn.Linear(4, 3)

    assert get_model_spec("fixed_three_test").build().out_features == 3
    assert get_model_spec("fixed_three_test", 3).build().out_features == 3
    with pytest.raises(UserError, match="--num_classes 5: model fixed_three_test has 3 classes "
                                        "only"):
        get_model_spec("fixed_three_test", 5)


def test_the_flag_is_checked():
    assert parse_options(["--model", "m"]).num_classes == 0
    assert parse_options(["--model", "m", "--num_classes", "10"]).num_classes == 10
    with pytest.raises(FlagError, match="expected a number of classes >= 1"):
        parse_options(["--model", "m", "--num_classes", "-1"])


def test_weights_of_another_class_count_name_exp_num_classes(resnet18_10):
    with pytest.raises(WeightsError) as info:
        load_weights(get_model_spec("resnet18").build(), str(resnet18_10), "resnet18")
    assert "size mismatch for fc.weight" in str(info.value)
    assert str(info.value).endswith("the weights have 10 classes, the model 1000: set "
                                    "exp.num_classes to 10 (the backend's --num_classes 10)")
    model = get_model_spec("resnet18", 10).build()
    load_weights(model, str(resnet18_10), "resnet18")
    assert model.fc.out_features == 10


def test_only_a_class_count_difference_gets_the_hint():
    ours = {"a.weight": torch.zeros(1000, 8), "a.bias": torch.zeros(1000)}
    assert other_class_count(ours, {"a.weight": torch.zeros(5, 8), "a.bias": torch.zeros(5)}) \
        == (5, 1000)
    assert other_class_count(ours, {"a.weight": torch.zeros(5, 9), "a.bias": torch.zeros(5)}) \
        is None
    assert other_class_count(ours, {"a.weight": torch.zeros(5, 8)}) is None
    assert other_class_count(ours, {"a.weight": torch.zeros(5, 8), "a.bias": torch.zeros(6)}) \
        is None


@pytest.mark.slow
def test_the_backend_runs_the_weights_with_num_classes_and_hints_without(resnet18_10):
    refused = run_backend("--model", "resnet18", *CPU_INFERENCE, "--weights", str(resnet18_10))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "set exp.num_classes to 10" in refused.values["results.status_msg"]
    ran = run_backend("--model", "resnet18", *CPU_INFERENCE, "--weights", str(resnet18_10),
                      "--num_classes", "10")
    assert ran.returncode == 0, ran.stderr
    assert ran.values["results.status"] == "ok"


def _documented_model_file() -> str:
    """The `my_models.py` of docs/extending.md, as a user would copy it."""
    text = (ROOT / "docs" / "extending.md").read_text()
    (block,) = re.findall(r"```python\n(# my_models\.py\n.*?)```", text, re.S)
    return block


@pytest.mark.slow
def test_the_documented_extra_models_file_runs(tmp_path):
    models = tmp_path / "my_models.py"
    models.write_text(_documented_model_file())
    for classes in ([], ["--num_classes", "10"]):
        run = run_backend("--model", "colour_net", "--extra_models", str(models),
                          *CPU_INFERENCE, *classes)
        assert run.returncode == 0, run.stderr
        assert run.values["exp.model_title"] == "ColourNet"
