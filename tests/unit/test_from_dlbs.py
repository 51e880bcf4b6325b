"""DLBS specs, as DLBS's tutorials write them, plan as their users expect (docs/from-dlbs.md)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from dlbs.config.loader import load_spec
from dlbs.plan.builder import Planner
from dlbs.plan.checks import check_plan
from dlbs.plan.unused import unused_parameters
from dlbs.run.policy import IGNORE, RUN, decide

ENV = {"DLBS_ROOT": "/opt/dlbs", "HOME": "/root", "BENCH_ROOT": "/bench"}

# DLBS's advanced tutorial (tutorials/dlcookbook/configs/advanced.json), with the frameworks
# this suite has: everything is disabled, then extensions re-enable the batch sizes that fit
# each model by setting exp.status to "".
ADVANCED = {
    "parameters": {
        "exp.num_warmup_batches": 1,
        "exp.num_batches": 1,
        "monitor.frequency": 0,
        "exp.status": "disabled",
        "exp.log_file": "${BENCH_ROOT}/${exp.framework}/"
                        "$(\"${exp.gpus}\".replace(\",\",\".\"))$_${exp.model}_${exp.effective_batch}.log",
        "exp.docker": True,
        "nvidia_caffe.docker_image": "nvcr.io/nvidia/caffe:17.11",
        "mxnet.docker_image": "nvcr.io/nvidia/mxnet:17.11",
    },
    "variables": {
        "exp.framework": ["pytorch", "mxnet"],
        "exp.gpus": ["0", "0,1", "0,1,2,3"],
        "exp.model": ["alexnet", "resnet50"],
        "exp.replica_batch": [32, 64, 128, 256],
    },
    "extensions": [
        {"condition": {"exp.model": "alexnet", "exp.replica_batch": [64, 128, 256]},
         "parameters": {"exp.status": ""}},
        {"condition": {"exp.model": "resnet50", "exp.replica_batch": [32, 64]},
         "parameters": {"exp.status": ""}},
    ],
}

# DLBS's distributed PyTorch recipe (tutorials/recipes/distributed/pytorch/config.json),
# started on each node as `experimenter run --config config.json -Ppytorch.distributed_rank=N`.
DISTRIBUTED = {
    "parameters": {
        "exp.framework": "pytorch",
        "exp.docker_image": "nvcr.io/nvidia/pytorch:18.06-py3",
        "exp.docker_args": "--rm --shm-size=1g --ulimit memlock=-1 --ulimit stack=67108864 "
                           "--ipc=host --net=host --privileged",
        "exp.num_nodes": 1,
        "pytorch.distributed_rendezvous": "127.0.0.1:29500",
        "exp.gpus": "0,1,2,3,4,5,6,7",
        "exp.num_warmup_batches": 100,
        "exp.num_batches": 400,
        "exp.log_file": "${BENCH_ROOT}/logs/rank_${pytorch.distributed_rank}.log",
        "exp.dtype": "float16",
        "exp.model": "resnet50",
        "exp.replica_batch": 256,
    }
}


def write_spec(tmp_path: Path, document: dict, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document, indent=2))
    return path


def planned(config: Path | None = None, env: dict = ENV, **kwargs) -> list[dict]:
    return list(Planner(load_spec(config, **kwargs), env).experiments())


def argv(experiment: dict, name: str) -> list[str]:
    """A `<framework>.args` list as the backend receives it: each item split into words."""
    return [word for item in experiment[name] for word in shlex.split(item)]


def flag(experiment: dict, name: str, option: str) -> str:
    words = argv(experiment, name)
    return words[words.index(option) + 1]


# ---- exp.status: "" --------------------------------------------------------------------------

def test_empty_status_reenables_experiments_as_in_the_advanced_tutorial(tmp_path):
    experiments = planned(write_spec(tmp_path, ADVANCED))
    assert len(experiments) == 2 * 3 * 2 * 4
    enabled = {(e["exp.model"], e["exp.replica_batch"]) for e in experiments
               if e["exp.status"] == ""}
    assert enabled == {("alexnet", 64), ("alexnet", 128), ("alexnet", 256),
                       ("resnet50", 32), ("resnet50", 64)}
    assert {e["exp.status"] for e in experiments} == {"", "disabled"}
    for experiment in experiments:
        decision = decide(experiment, latest_status=None, oom_limit=None)
        assert decision.action == (RUN if experiment["exp.status"] == "" else IGNORE)
    first = experiments[0]
    assert first["exp.log_file"] == "/bench/pytorch/0_alexnet_32.log"
    assert unused_parameters(load_spec(tmp_path / "config.json")) == []


def test_empty_status_does_not_change_the_id():
    (ok,) = planned(params=["exp.status=ok"])
    (empty,) = planned(params=['exp.status=""'])
    assert empty["exp.status"] == "" and ok["exp.id"] == empty["exp.id"]


def test_values_take_their_declared_types(tmp_path):
    # DLBS specs quote numbers and booleans freely; here they become what they mean.
    spec = write_spec(tmp_path, {"parameters": {
        "exp.replica_batch": "2048", "exp.num_batches": "10", "exp.docker": "false",
        "pytorch.cudnn_benchmark": "false", "monitor.frequency": "0.5"}})
    (experiment,) = planned(spec)
    assert experiment["exp.replica_batch"] == 2048 and experiment["exp.num_batches"] == 10
    assert experiment["exp.docker"] is False and experiment["pytorch.cudnn_benchmark"] is False
    assert experiment["monitor.frequency"] == 0.5
    assert flag(experiment, "pytorch.args", "--batch_size") == "2048"
    assert flag(experiment, "pytorch.args", "--cudnn_benchmark") == "false"


# ---- settings DLBS users set: rendered into <framework>.args / .env -------------------------

def test_pytorch_settings_reach_the_backend_command_line():
    (default,) = planned()
    assert flag(default, "pytorch.args", "--data_loader_only") == "false"
    assert flag(default, "pytorch.args", "--tf32") == "true"
    (loader,) = planned(params=["pytorch.data_loader_only=true", "exp.data_dir=/data/lmdb",
                                "exp.use_tensor_core=false"])
    assert flag(loader, "pytorch.args", "--data_loader_only") == "true"
    assert flag(loader, "pytorch.args", "--tf32") == "false"
    assert loader["exp.id"] != default["exp.id"]  # both change what is measured


def test_mxnet_tutorial_settings_reach_the_backend(tmp_path):
    # tutorials/dlcookbook/mxnet.sh: `-Pmxnet.cudnn_autotune='"false"'` (a string!) and the
    # float32/float16 comparison with tensor cores on.
    spec = write_spec(tmp_path, {
        "parameters": {"exp.framework": "mxnet", "exp.gpus": "0", "exp.replica_batch": 16,
                       "mxnet.cudnn_autotune": "false", "exp.use_tensor_core": True,
                       "mxnet.preprocess_threads": 2, "mxnet.prefetch_buffer": 3},
        "variables": {"exp.dtype": ["float32", "float16"]}})
    experiments = planned(spec)
    assert [e["exp.dtype"] for e in experiments] == ["float32", "float16"]
    for experiment in experiments:
        assert experiment["mxnet.cudnn_autotune"] is False
        assert flag(experiment, "mxnet.args", "--cudnn_autotune") == "false"
        assert flag(experiment, "mxnet.args", "--preprocess_threads") == "2"
        assert flag(experiment, "mxnet.args", "--prefetch_buffer") == "3"
        assert experiment["mxnet.env"]["MXNET_CUDA_ALLOW_TENSOR_CORE"] == "1"
    (off,) = planned(params=["exp.framework=mxnet", "exp.use_tensor_core=false"])
    assert off["mxnet.env"]["MXNET_CUDA_ALLOW_TENSOR_CORE"] == "0"
    assert flag(off, "mxnet.args", "--cudnn_autotune") == "true"
    assert flag(off, "mxnet.args", "--preprocess_threads") == "4"
    assert flag(off, "mxnet.args", "--prefetch_buffer") == "10"


@pytest.mark.parametrize("name", ["pytorch.data_loader_only", "mxnet.preprocess_threads",
                                  "mxnet.prefetch_buffer", "mxnet.cudnn_autotune",
                                  "exp.use_tensor_core", "pytorch.distributed_rank",
                                  "pytorch.distributed_rendezvous"])
def test_dlbs_settings_are_declared(name):
    definition = load_spec().params[name]
    assert definition.type is not None and definition.desc


def test_data_loader_only_needs_real_data():
    spec = load_spec(params=["pytorch.data_loader_only=true"])
    report = check_plan(Planner(spec, ENV))
    assert report.problems == ["experiment #1: pytorch.data_loader_only times the data loader, "
                               "but exp.data_dir is empty (synthetic data has no loader)"]


def test_tensor_cores_off_in_pytorch_half_precision_is_a_warning():
    spec = load_spec(params=["exp.use_tensor_core=false", "exp.gpus=0"],
                     variables=['exp.dtype=["float32", "float16", "bfloat16"]'])
    report = check_plan(Planner(spec, ENV))
    assert report.problems == []
    assert [w for w in report.warnings if "use_tensor_core" in w] == [
        "exp.use_tensor_core is false in 1 PyTorch bfloat16 experiments: PyTorch can only "
        "switch TF32 off (float32 math); bfloat16 math still uses tensor cores",
        "exp.use_tensor_core is false in 1 PyTorch float16 experiments: PyTorch can only "
        "switch TF32 off (float32 math); float16 math still uses tensor cores"]


# ---- the distributed PyTorch tutorial --------------------------------------------------------

def test_distributed_tutorial_plans_one_log_per_rank(tmp_path):
    config = write_spec(tmp_path, DISTRIBUTED)
    # The recipe names an image and relies on DLBS's default exp.docker (true): the one warning.
    (warning,) = unused_parameters(load_spec(config))
    assert "exp.docker_image names an image, but exp.docker is false" in warning
    (rank0,) = planned(config)
    (rank1,) = planned(config, params=["pytorch.distributed_rank=1"])
    assert rank0["exp.log_file"] == "/bench/logs/rank_0.log"
    assert rank1["exp.log_file"] == "/bench/logs/rank_1.log"
    assert rank0["exp.id"] == rank1["exp.id"]  # one experiment, seen from two nodes
    assert rank0["exp.effective_batch"] == 256 * 8
    # One node: torchrun --standalone; the rank and rendezvous mean nothing.
    assert rank1["pytorch.env"]["PET_NODE_RANK"] is None
    assert rank1["pytorch.env"]["PET_MASTER_ADDR"] is None


def test_hand_started_nodes_give_torchrun_their_rank_and_rendezvous(tmp_path):
    config = write_spec(tmp_path, DISTRIBUTED)
    nodes = [planned(config, params=["exp.num_nodes=2", f"pytorch.distributed_rank={rank}"])[0]
             for rank in (0, 1)]
    assert [n["pytorch.env"]["PET_NODE_RANK"] for n in nodes] == [0, 1]
    assert {n["pytorch.env"]["PET_MASTER_ADDR"] for n in nodes} == {"127.0.0.1"}
    assert {n["pytorch.env"]["PET_MASTER_PORT"] for n in nodes} == {"29500"}
    assert nodes[0]["exp.id"] == nodes[1]["exp.id"]
    assert nodes[0]["exp.effective_batch"] == 256 * 16
    # Without a rendezvous, torchrun's own default address and port apply.
    (bare,) = planned(params=["exp.num_nodes=2", "pytorch.distributed_rank=1"])
    assert bare["pytorch.env"]["PET_NODE_RANK"] == 1
    assert bare["pytorch.env"]["PET_MASTER_ADDR"] is None
    # A SLURM job numbers its nodes itself.
    (slurm,) = planned(config, params=["exp.num_nodes=2", "exp.scheduler=slurm"])
    assert {slurm["pytorch.env"][k] for k in ("PET_NODE_RANK", "PET_MASTER_ADDR")} == {None}


def test_rendezvous_must_be_host_and_port():
    from dlbs.errors import ConfigError

    (ipv6,) = planned(params=["exp.num_nodes=2", "pytorch.distributed_rendezvous=[::1]:4000"])
    assert ipv6["pytorch.env"]["PET_MASTER_ADDR"] == "[::1]"
    with pytest.raises(ConfigError, match="pytorch.distributed_rendezvous.*regex"):
        planned(params=["pytorch.distributed_rendezvous=node1"])


# ---- names dlbs does not have ------------------------------------------------------------------

TYPOS = """
parameters:
  pytorch.num_thread: 4
  global_batch: 512
  exp.replica_batch: "$(${global_batch} // ${exp.num_replicas})$"
  unused_helper: 3
  pytorch.my_tag: fast
  exp.log_file: "${exp.log_dir}/${pytorch.my_tag}_${exp.id}.log"
  runtime.env.NCCL_DEBUG: INFO
  mxnet.workspace: 1024
  tensorflow.var_update: replicated
variables:
  exp.modell: [resnet50]
  my.axis: [1, 2]
extensions:
  - condition: {exp.model: resnet50}
    parameters: {mxnet.kv_stor: device}
  - condition: {slurm.my_switch: true}
    parameters: {exp.num_batches: 5}
"""


def test_a_name_in_dlbs_namespaces_that_no_config_declares_is_refused(tmp_path):
    """Set, swept, set or tested by an extension, used by a template or not: one error."""
    from dlbs.errors import ConfigError
    from dlbs.plan.unused import refuse_undeclared

    path = tmp_path / "typos.yaml"
    path.write_text(TYPOS)
    with pytest.raises(ConfigError) as error:
        refuse_undeclared(load_spec(path))
    assert error.value.message == (
        f"{path}: parameter 'pytorch.num_thread' (nearest: pytorch.num_threads, "
        "pytorch.num_loader_threads) is not declared by any config; nor 'pytorch.my_tag', "
        "'exp.modell' (nearest: exp.model, exp.model_title, exp.model_opts), 'mxnet.kv_stor' "
        "(nearest: mxnet.kv_store), 'slurm.my_switch'")
    assert "--params '^pytorch[.]'" in error.value.hint
    # The spec's own names (global_batch, my.axis, DLBS's tensorflow.*) are its own axes.
    path.write_text(TYPOS.replace("pytorch.num_thread", "pytorch.num_threads")
                    .replace("pytorch.my_tag", "my.tag").replace("exp.modell", "exp.model")
                    .replace("mxnet.kv_stor", "mxnet.kv_store")
                    .replace("slurm.my_switch", "my.switch"))
    spec = load_spec(path)
    refuse_undeclared(spec)
    # DLBS's settings that dlbs has no use for are declared, and said to do nothing.
    assert unused_parameters(spec) == [
        f"{path}: parameter 'mxnet.workspace' is DLBS's, and nothing in dlbs reads it (the "
        "MXNet backend leaves cuDNN's workspace limit to MXNet)"]


def test_a_name_the_spec_declares_with_a_type_is_its_own():
    from dlbs.plan.unused import refuse_undeclared

    spec = load_spec(params=['pytorch.flavour={"val": "x", "type": "str"}',
                             'mxnet.flavour={"val": "y", "type": "str"}',
                             "my.tag=${${exp.framework}.flavour}"])
    refuse_undeclared(spec)
    (experiment,) = Planner(spec).experiments()
    assert experiment["my.tag"] == "x"


def test_every_dlbs_setting_dlbs_has_no_use_for_is_declared_outside_the_id():
    from dlbs.plan.unused import DLBS_ONLY

    spec = load_spec()
    for name in DLBS_ONLY:
        assert spec.params[name].type is not None and spec.params[name].host, name
    declared = {name for name, d in spec.params.items()
                if Path(d.source).name == "90-from-dlbs.yaml"}
    assert declared == set(DLBS_ONLY)


def test_nothing_is_reported_without_the_default_configs():
    from dlbs.plan.unused import refuse_undeclared

    spec = load_spec(params=["exp.anything=1", "pytorch.num_thread=2"], defaults=False)
    assert unused_parameters(spec) == []
    refuse_undeclared(spec)
