"""Tracing in the plan and the recipe: ids kept, impossible traces refused, flags and mounts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from dlbs.config.loader import load_spec
from dlbs.errors import PlanError
from dlbs.plan.builder import Planner
from dlbs.recipes.build import invocation_for
from dlbs.recipes.invocation import Mount

REPO = Path(__file__).resolve().parents[2]
ENV = {"DLBS_ROOT": str(REPO), "HOME": "/root"}
SWEEP = ("exp.framework=[\"pytorch\", \"mxnet\", \"dummy\"]",
         "exp.phase=[\"training\", \"inference\"]", "exp.replica_batch=[1, 32]")


def plan(*params: str, variables: tuple[str, ...] = ()) -> list[dict]:
    spec = load_spec(None, params=list(params), variables=list(variables))
    return list(Planner(spec, ENV).experiments())


def ids(experiments: list[dict]) -> list[str]:
    return [experiment["exp.id"] for experiment in experiments]


def test_the_trace_config_changes_no_id(tmp_path, monkeypatch):
    """Experiments planned with and without configs/03-trace.yaml have the same ids."""
    def every_id() -> list[str]:
        return ids(plan(variables=SWEEP)) + ids(plan("exp.framework=onnxruntime",
                                                      "exp.phase=inference"))

    with_tracing = every_id()
    without = tmp_path / "configs"
    shutil.copytree(REPO / "configs", without)
    (without / "03-trace.yaml").unlink()
    monkeypatch.setenv("DLBS_CONFIGS", str(without))
    assert every_id() == with_tracing


def test_a_traced_experiment_keeps_its_id():
    untraced = plan("exp.framework=pytorch")[0]
    traced = plan("exp.framework=pytorch", "exp.trace_level=operator", "exp.trace_batches=3")[0]
    assert traced["exp.id"] == untraced["exp.id"]
    assert traced["pytorch.args"] == untraced["pytorch.args"]
    assert untraced["exp.trace_file"] == ""
    assert traced["exp.trace_file"] == untraced["exp.log_file"].removesuffix(".log") + \
        ".trace.json.gz"


@pytest.mark.parametrize("params, message", [
    (["exp.trace_level=kernel"], "exp.trace_level kernel traces GPU kernels and needs a GPU"),
    (["exp.framework=pytorch", "exp.trace_level=layer", "pytorch.compile=true"],
     "which torch.compile fuses into one graph"),
    (["exp.framework=pytorch", "exp.trace_level=layer", "exp.gpus=0", "exp.phase=inference",
      "pytorch.cuda_graphs=true"], "which a CUDA graph replays as one"),
    (["exp.framework=mxnet", "exp.trace_level=layer"], "which a hybridized graph runs as one"),
    (["exp.framework=onnxruntime", "exp.phase=inference", "exp.trace_level=step"],
     "needs a backend that traces"),
    (["exp.framework=pytorch", "exp.trace_level=step",
      'pytorch.extra_args=["--trace_batches 9"]'], "repeats a trace flag"),
    (["exp.framework=mxnet", 'mxnet.extra_args=["--trace_level=layer"]'],
     "repeats a trace flag"),
    (["exp.framework=dummy", "exp.phase=inference", "exp.scenario=offline",
      "exp.trace_level=step"], "not a LoadGen scenario"),
])
def test_traces_that_cannot_be_taken_are_refused(params, message):
    with pytest.raises(PlanError, match=message):
        plan(*params)


@pytest.mark.parametrize("params", [
    ["exp.framework=pytorch", "exp.trace_level=operator", "pytorch.compile=true"],
    ["exp.framework=pytorch", "exp.trace_level=kernel", "exp.gpus=0"],
    ["exp.framework=mxnet", "exp.trace_level=layer", "mxnet.hybridize=false"],
    ["exp.framework=mxnet", "exp.trace_level=operator"],
    ["exp.framework=pytorch", "exp.trace_level=full"],
    ["exp.framework=onnxruntime", "exp.phase=inference"],
])
def test_the_neighbours_of_each_rule_plan(params):
    assert len(plan(*params)) == 1


def test_batches_to_trace_are_at_least_one():
    with pytest.raises(Exception, match="exp.trace_batches"):
        plan("exp.trace_batches=0")


@pytest.mark.parametrize("framework", ["pytorch", "mxnet", "dummy"])
def test_the_recipe_adds_the_trace_flags_only_when_tracing(framework, tmp_path,
                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)
    common = (f"exp.framework={framework}", "exp.log_dir=logs")
    untraced = invocation_for(plan(*common)[0])
    assert not [token for token in untraced.argv if token.startswith("--trace")]
    experiment = plan(*common, "exp.trace_level=step", "exp.trace_batches=7")[0]
    invocation = invocation_for(experiment)
    assert invocation.argv[-6:] == [
        "--trace_level", "step", "--trace_batches", "7",
        "--trace_file", str(tmp_path / experiment["exp.trace_file"])]
    assert invocation.argv[:-6] == untraced.argv
    assert not invocation.mounts  # bare metal: the host's own paths


def test_a_container_sees_the_trace_folder_at_the_hosts_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    experiment = plan("exp.framework=dummy", "exp.docker=true", "exp.log_dir=logs",
                      "exp.trace_level=layer")[0]
    invocation = invocation_for(experiment)
    folder = str(tmp_path / "logs")
    assert Mount(folder, folder) in invocation.mounts
    assert invocation.argv[-1] == os.path.join(folder, os.path.basename(
        experiment["exp.trace_file"]))
    untraced = invocation_for(plan("exp.framework=dummy", "exp.docker=true")[0])
    assert Mount(folder, folder) not in untraced.mounts


def test_dry_run_shows_the_trace_flags(dlbs_cli, tmp_path):
    done = dlbs_cli("run", "--dry-run", "--format", "json", "-P", "exp.framework=dummy",
                    "-P", "exp.trace_level=operator", "-P", f"exp.log_dir={tmp_path}")
    assert done.returncode == 0, done.stderr
    assert '"--trace_level","operator"' in done.stdout.replace(", ", ",")
