"""dlbs parameters DLBS users set reach the MXNet backend (mxnet.args, mxnet.env) and count.

The spec is the one of DLBS's MXNet tutorial (tutorials/dlcookbook/mxnet.sh), which gives
`mxnet.cudnn_autotune` as the string "false" and sets `exp.use_tensor_core`.
"""

from __future__ import annotations

import re

import pytest
from mx_helpers import parse_protocol, run_process, write_record_file

from dlbs.config.loader import load_spec
from dlbs.plan.builder import Planner
from dlbs.recipes.recipe import recipe_for

pytestmark = pytest.mark.mxnet

TUNING_LINE = re.compile(r"^\[mxnet_benchmarks\] MXNet 1\.9\.1: .*$", re.M)
RECORDIO_LINE = re.compile(r"^\[mxnet_benchmarks\] RecordIO .*$", re.M)
COMMON = ["exp.framework=mxnet", "exp.model=resnet18", "exp.phase=inference",
          "exp.replica_batch=2", "exp.num_batches=2", "exp.num_warmup_batches=0"]


def run_planned(*params: str):
    """Plan one experiment, run it as the mxnet recipe runs it on bare metal (CPU here)."""
    (experiment,) = Planner(load_spec(params=[*COMMON, *params])).experiments()
    recipe = recipe_for(experiment)
    run = run_process(recipe.command(experiment), env=recipe.environment(experiment))
    assert run.returncode == 0, run.stderr[-3000:]
    assert parse_protocol(run.stdout)["results.status"] == "ok"
    return run


def test_defaults_let_mxnet_tune_and_use_tensor_cores():
    line = TUNING_LINE.search(run_planned().stdout).group(0)
    assert "MXNET_CUDNN_AUTOTUNE_DEFAULT=1 " in line
    assert "MXNET_CUDA_ALLOW_TENSOR_CORE=1 " in line


def test_tutorial_settings_reach_mxnet(tmp_path):
    write_record_file(tmp_path / "train.rec", 4, (240, 240))
    run = run_planned('mxnet.cudnn_autotune="false"', "exp.use_tensor_core=false",
                      "mxnet.preprocess_threads=1", "mxnet.prefetch_buffer=2",
                      f"exp.data_dir={tmp_path}")
    line = TUNING_LINE.search(run.stdout).group(0)
    assert "MXNET_CUDNN_AUTOTUNE_DEFAULT=0 " in line
    assert "MXNET_CUDA_ALLOW_TENSOR_CORE=0 " in line
    recordio = RECORDIO_LINE.search(run.stdout).group(0)
    assert f"RecordIO {tmp_path / 'train.rec'}: preprocess_threads=1 prefetch_buffer=2" in recordio
