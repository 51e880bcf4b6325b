"""dlbs parameters DLBS users set reach the backend through pytorch.args, and it honours them."""

from __future__ import annotations

import re
import shlex

import pytest

from dlbs.config.loader import load_spec
from dlbs.plan.builder import Planner

pytestmark = pytest.mark.pytorch

SETUP_LINE = re.compile(r"^\[pytorch_benchmarks\] model=.*$", re.M)


def planned_argv(*params: str) -> list[str]:
    """The backend's arguments of the one experiment `-P params` plan."""
    (experiment,) = Planner(load_spec(params=list(params)), {"DLBS_ROOT": "/opt/dlbs"}
                            ).experiments()
    return [word for item in experiment["pytorch.args"] for word in shlex.split(item)]


COMMON = ["exp.model=tiny_cnn", "exp.replica_batch=3", "exp.num_batches=2",
          "exp.num_warmup_batches=0", "pytorch.num_loader_threads=0"]


def setup_line(run) -> str:
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.values["results.status"] == "ok"
    return SETUP_LINE.search(run.stdout).group(0)


def test_defaults_keep_tensor_cores_and_the_model(backend, extra_models):
    # The test's tiny model is registered by a file of its own, given to the backend directly.
    line = setup_line(backend(*planned_argv(*COMMON), "--extra_models", str(extra_models)))
    assert "data_loader_only=False" in line
    assert "float32_matmul_precision=high " in line and "cudnn_tf32=True" in line


def test_tensor_cores_off_and_data_loader_only(backend, extra_models, image_folder):
    argv = planned_argv(*COMMON, "exp.use_tensor_core=false", "pytorch.data_loader_only=true",
                        f"exp.data_dir={image_folder}", "pytorch.data_backend=image_folder")
    run = backend(*argv, "--extra_models", str(extra_models))
    line = setup_line(run)
    assert "data_loader_only=True" in line
    assert "float32_matmul_precision=highest " in line and "cudnn_tf32=False" in line
    assert run.values["results.throughput"] > 0 and run.values["results.time_data_wait"] >= 0
