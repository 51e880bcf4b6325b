"""The fast training path: channels_last auto, the optimizers, compile options, plan rules.

What runs only on a GPU (the captured step, nvJPEG) is measured in bench/pytorch_gpu/; here
are the decisions around it, which the CPU can check.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dlbs.config.loader import load_spec
from dlbs.plan.builder import Planner

pytestmark = pytest.mark.pytorch


def planned(*params: str) -> dict:
    """The one experiment `-P params` plan."""
    (experiment,) = Planner(load_spec(params=list(params)), {"DLBS_ROOT": "/opt/dlbs"}
                            ).experiments()
    return experiment


# -- channels_last auto -------------------------------------------------------------------

@pytest.mark.parametrize("params, expected", [
    ([], False),                                                   # the CPU
    (["exp.gpus=0"], True),                                        # an image model on a GPU
    (["exp.gpus=0", "exp.model=inception3"], True),
    (["exp.gpus=0,1", "exp.model=vgg16"], True),
    (["exp.gpus=0", "exp.model=deep_mnist"], False),               # fully connected
    (["exp.gpus=0", "exp.model=acoustic_model"], False),
    (["exp.gpus=0", "pytorch.channels_last=false"], False),        # an explicit choice wins
    (["pytorch.channels_last=true"], True),
])
def test_channels_last_auto_is_resolved_in_the_plan(params, expected):
    experiment = planned("exp.framework=pytorch", *params)
    assert experiment["pytorch.channels_last"] is expected
    assert f"--channels_last {str(expected).lower()}" in experiment["pytorch.args"]


def test_auto_gives_the_id_of_the_layout_it_chose():
    # What ran decides the id: the GPU default is the explicit channels-last experiment, the
    # CPU default the explicit NCHW one.
    gpu = ["exp.framework=pytorch", "exp.gpus=0"]
    assert planned(*gpu)["exp.id"] == planned(*gpu, "pytorch.channels_last=true")["exp.id"]
    assert planned(*gpu)["exp.id"] != planned(*gpu, "pytorch.channels_last=false")["exp.id"]
    assert planned("exp.framework=pytorch")["exp.id"] == planned(
        "exp.framework=pytorch", "pytorch.channels_last=false")["exp.id"]


def _spec(shape):
    return SimpleNamespace(input_shape=shape)


@pytest.mark.parametrize("flag, device, shape, expected", [
    ("auto", "gpu", (3, 224, 224), True),
    ("auto", "cpu", (3, 224, 224), False),
    ("auto", "gpu", (784,), False),
    (True, "cpu", (3, 32, 32), True),
    (True, "gpu", (784,), False),   # a model of other input never changes layout
    (False, "gpu", (3, 224, 224), False),
])
def test_the_backend_resolves_auto_the_same_way(flag, device, shape, expected):
    from pytorch_benchmarks.runner import uses_channels_last

    opts = SimpleNamespace(channels_last=flag, device=device)
    assert uses_channels_last(_spec(shape), opts) is expected


# -- plan-time rules of the new parameters -------------------------------------------------

def test_gpu_decoding_is_refused_when_the_plan_is_made_without_a_gpu(dlbs_cli, tmp_path):
    proc = dlbs_cli("plan", "-P", "exp.framework=pytorch", "-P", f"exp.data_dir={tmp_path}",
                    "-P", "pytorch.data_backend=image_folder", "-P", "pytorch.decode=gpu")
    assert proc.returncode == 2 and proc.stdout == ""
    line = proc.stderr.splitlines()[0]
    assert line.startswith("dlbs: error: pytorch.decode gpu decodes JPEG files on a GPU")
    assert "Traceback" not in proc.stderr


def test_a_decode_sweep_plans_both_experiments_on_a_gpu(tmp_path):
    spec = load_spec(params=["exp.framework=pytorch", "exp.gpus=0", f"exp.data_dir={tmp_path}",
                             "pytorch.data_backend=image_folder"],
                     variables=['pytorch.decode=["cpu", "gpu"]'])
    experiments = list(Planner(spec, {"DLBS_ROOT": "/opt/dlbs"}).experiments())
    assert [e["pytorch.decode"] for e in experiments] == ["cpu", "gpu"]
    assert len({e["exp.id"] for e in experiments}) == 2  # decode is part of the id
    assert "--decode gpu" in experiments[1]["pytorch.args"]


def test_training_cuda_graphs_plan_with_the_fused_optimizer():
    experiment = planned("exp.framework=pytorch", "exp.gpus=0", "exp.dtype=float16",
                         "pytorch.cuda_graphs=true", "pytorch.compile=true",
                         'pytorch.inductor_options=["coordinate_descent_tuning=true"]',
                         "pytorch.optimizer=lars")
    args = " ".join(experiment["pytorch.args"])
    assert "--cuda_graphs true" in args and "--optimizer lars" in args
    assert "--inductor_options coordinate_descent_tuning=true" in args


# -- compile options ----------------------------------------------------------------------

def _opts(**overrides):
    from pytorch_benchmarks.cli import parse_options

    argv = ["--model", "resnet50", "--compile"]
    for name, value in overrides.items():
        argv += [f"--{name}", *(value if isinstance(value, list) else [str(value)])]
    return parse_options(argv)


@pytest.mark.parametrize("flags, mode, cudagraphs", [
    ({}, "default", None),
    ({"compile_mode": "max-autotune"}, "max-autotune", True),
    ({"forward_only": "true", "cuda_graphs": "true"}, "reduce-overhead", True),
    # Training with --cuda_graphs: the backend captures the step; inductor must not.
    ({"cuda_graphs": "true"}, "default", None),
    ({"cuda_graphs": "true", "compile_mode": "max-autotune"}, "max-autotune-no-cudagraphs",
     None),
    ({"cuda_graphs": "true", "compile_mode": "reduce-overhead"}, "default", None),
])
def test_compile_modes_and_options(flags, mode, cudagraphs):
    from pytorch_benchmarks.runner import compile_mode, compile_options

    opts = _opts(**flags)
    assert compile_mode(opts) == mode
    assert compile_options(opts).get("triton.cudagraphs") is cudagraphs


def test_inductor_options_go_over_the_modes_and_unknown_ones_are_refused():
    from pytorch_benchmarks.runner import SetupError, compile_options

    options = compile_options(_opts(compile_mode="max-autotune-no-cudagraphs", inductor_options=[
        "coordinate_descent_tuning=false", "max_autotune_conv_backends=ATEN"]))
    assert options["max_autotune"] is True and options["coordinate_descent_tuning"] is False
    assert options["max_autotune_conv_backends"] == "ATEN"
    with pytest.raises(SetupError, match="no_such_setting: torch .* has no such"):
        compile_options(_opts(inductor_options=["no_such_setting=1"]))
    with pytest.raises(SetupError, match="captured whole"):
        compile_options(_opts(cuda_graphs="true", inductor_options=["triton.cudagraphs=true"]))


# -- the optimizers -----------------------------------------------------------------------

def _model():
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 6 * 6, 5)).double()
    loss = model(torch.randn(2, 3, 8, 8, dtype=torch.float64)).square().sum()
    loss.backward()
    return model


def _lars_by_hand(model, lr):
    """One LARS step from zero momentum, one tensor at a time (MLPerf's definition)."""
    import torch.nn as nn
    from pytorch_benchmarks.optimizers import LARS_ETA, WEIGHT_DECAY

    expected = {}
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            g = p.grad
            if name == "weight" and isinstance(module, nn.Conv2d | nn.Linear):
                w_norm, g_norm = p.norm(), g.norm()
                trust = LARS_ETA * w_norm / (g_norm + WEIGHT_DECAY * w_norm)
                g = (g + WEIGHT_DECAY * p) * trust
            expected[id(p)] = p - lr * g  # first step: the momentum buffer is the gradient
    return expected


@pytest.mark.parametrize("implementation", ["fused", "foreach"])
def test_lars_is_the_per_layer_trust_ratio_then_sgd(implementation):
    import torch
    from pytorch_benchmarks.optimizers import make_optimizer

    model = _model()
    expected = _lars_by_hand(model, lr=0.1)
    make_optimizer(model, "lars", implementation, lr=0.1).step()
    for p in model.parameters():
        assert torch.allclose(p, expected[id(p)], rtol=1e-10, atol=1e-12)


def test_lars_unscales_a_fused_step_handed_a_grad_scale():
    import torch
    from pytorch_benchmarks.optimizers import make_optimizer

    model = _model()
    expected = _lars_by_hand(model, lr=0.1)
    for p in model.parameters():
        p.grad.mul_(1024.0)  # what a GradScaler's scaled loss gives
    optimizer = make_optimizer(model, "lars", "fused", lr=0.1)
    # As GradScaler.step hands them to a fused optimizer: float32 scalars on the device.
    optimizer.grad_scale = torch.tensor(1024.0)
    optimizer.found_inf = torch.tensor(0.0)
    optimizer.step()
    for p in model.parameters():
        assert torch.allclose(p, expected[id(p)], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("implementation", ["fused", "foreach"])
def test_sgd_is_torch_optims_with_the_imagenet_recipe(implementation):
    import torch
    from pytorch_benchmarks.optimizers import make_optimizer

    optimizer = make_optimizer(_model(), "sgd", implementation, lr=0.05)
    assert isinstance(optimizer, torch.optim.SGD)
    group = optimizer.param_groups[0]
    assert (group["momentum"], group["weight_decay"], group["lr"]) == (0.9, 1e-4, 0.05)
    assert group["fused"] is (True if implementation == "fused" else None)
    assert group["foreach"] is (True if implementation == "foreach" else None)
