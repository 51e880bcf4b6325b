"""FLOPs per sample (pytorch_benchmarks/flops.py) and the marks of the timed interval."""

from __future__ import annotations

import datetime as dt

import pytest
import torch
import torch.nn as nn
from pytorch_benchmarks.flops import count_flops_per_sample, flops_results
from pytorch_benchmarks.models import get_model_spec

pytestmark = pytest.mark.pytorch

#: ResNet-50 at 224 x 224: 4.09 G multiply-adds per image (torchvision's model card; the
#: figure every paper quotes), so 8.18 GFLOPs at 2 FLOPs per multiply-add.
RESNET50_FLOPS = 2 * 4.09e9


def test_torchvisions_resnet50_at_224():
    import torchvision

    forward, total = count_flops_per_sample(torchvision.models.resnet50, (3, 224, 224),
                                            training=False)
    assert forward == total
    assert forward == pytest.approx(RESNET50_FLOPS, rel=0.02)


def test_training_is_forward_and_backward():
    import torchvision

    forward, total = count_flops_per_sample(torchvision.models.resnet50, (3, 224, 224),
                                            training=True)
    # The backward of each product is two (input and weight gradients), except the first
    # layer's input gradient, which is never computed: a little under three forwards.
    assert 2.9 * forward < total < 3.0 * forward


def test_one_linear_layer_by_hand():
    forward, total = count_flops_per_sample(lambda: nn.Linear(100, 10), (100,), training=True)
    assert forward == 2 * 100 * 10          # one multiply-add per weight and sample
    assert total == forward + 2 * 100 * 10  # the weight gradient; no gradient of the input


def test_the_dlbs_resnet50_counts_as_torchvisions():
    keys = flops_results("resnet50", (3, 224, 224), False, torch.device("cpu"))
    assert keys["results.flops_per_sample"] == pytest.approx(RESNET50_FLOPS, rel=0.02)
    assert "results.gpu_model" not in keys  # named on a GPU only


def test_a_model_that_cannot_be_counted_gives_a_reason():
    keys = flops_results("resnet50", (7,), True, torch.device("cpu"))  # a wrong input shape
    assert set(keys) == {"results.flops_unavailable"}
    assert keys["results.flops_unavailable"].startswith(
        "torch.utils.flop_counter could not count resnet50 on the meta device: ")


@pytest.mark.parametrize("phase", ["training", "inference"])
def test_a_run_prints_flops_and_marks_its_timed_interval(backend, phase):
    run = backend("--model", "sensor_net", "--forward_only", str(phase == "inference").lower(),
                  "--batch_size", "4", "--num_warmup_batches", "1", "--num_batches", "3",
                  "--device", "cpu", "--num_threads", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    values = run.values
    spec = get_model_spec("sensor_net")
    forward, total = count_flops_per_sample(spec.build, spec.input_shape, phase == "training")
    assert values["results.flops_per_sample"] == total
    assert values["results.flops_forward_per_sample"] == forward
    start = dt.datetime.fromisoformat(values["results.timed_start"])
    end = dt.datetime.fromisoformat(values["results.timed_end"])
    # The marks bound the timed batches (plus the microseconds of printing a mark).
    timed = (end - start).total_seconds() * 1000.0
    assert sum(values["results.time_data"]) <= timed <= sum(values["results.time_data"]) + 50
    lines = run.stdout.splitlines()
    assert lines.index(next(x for x in lines if "timed_start" in x)) < \
        lines.index(next(x for x in lines if "timed_end" in x))

