"""The default configs: standard DLBS meanings, framework namespaces, ids, examples."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from dlbs.config.loader import default_config_files, load_spec
from dlbs.errors import ConfigError
from dlbs.plan.builder import Planner

REPO = Path(__file__).resolve().parents[2]
ENV = {"DLBS_ROOT": "/opt/dlbs", "HOME": "/root"}


def plan(config=None, env=ENV, **kwargs) -> list[dict]:
    return list(Planner(load_spec(config, **kwargs), env).experiments())


def test_embedded_defaults_are_one_cpu_pytorch_experiment():
    (experiment,) = plan()
    assert experiment["exp.framework"] == "pytorch"
    assert experiment["exp.device_type"] == "cpu"
    assert experiment["exp.num_gpus"] == 0 and experiment["exp.num_replicas"] == 1
    assert experiment["exp.docker"] is False and experiment["exp.docker_launcher"] == "docker"
    assert experiment["runtime.results_db"] == "logs/results.db"
    assert experiment["exp.log_file"].startswith("logs/pytorch_cpu_resnet50_16_")
    assert experiment["exp.log_file"].endswith(experiment["exp.id"] + ".log")
    assert not [k for k in experiment if k.startswith(("mxnet.", "dummy.", "sys."))]
    assert "--device cpu" in experiment["pytorch.args"]


def test_every_default_parameter_is_typed_and_documented():
    spec = load_spec()
    for name, definition in spec.params.items():
        assert definition.type is not None, name
        assert definition.desc, name
    names = [Path(p).name for p in default_config_files()]
    assert names[0] == "00-base.yaml" and names == sorted(names)
    assert {"01-run.yaml", "10-pytorch.yaml", "20-mxnet.yaml"} <= set(names)


@pytest.mark.parametrize("gpus, nodes, replicas, local_gpus, num_gpus, visible", [
    ("", 1, 1, 0, 0, ""),
    ("0", 1, 1, 1, 1, "0"),
    ("0,1,2,3", 1, 4, 4, 4, "0,1,2,3"),
    ("0:1,2:3", 1, 2, 4, 4, "0,1,2,3"),
    ("0,1", 2, 4, 2, 4, "0,1"),
])
def test_gpu_arithmetic(gpus, nodes, replicas, local_gpus, num_gpus, visible):
    (e,) = plan(params=[f"exp.gpus={gpus}", f"exp.num_nodes={nodes}", "exp.replica_batch=32"],
                defaults=True)
    assert e["exp.num_replicas"] == replicas
    assert e["exp.num_local_gpus"] == local_gpus
    assert e["exp.num_gpus"] == num_gpus
    assert e["exp.device_type"] == ("gpu" if num_gpus else "cpu")
    assert e["exp.effective_batch"] == 32 * replicas
    assert e["runtime.visible_gpus"] == visible


def test_gpus_regex_is_enforced():
    with pytest.raises(ConfigError, match="exp.gpus.*does not match the regex"):
        plan(params=["exp.gpus=0;1"])


def test_frameworks_hold_only_their_namespace():
    experiments = plan(variables=['exp.framework=["pytorch", "mxnet"]'])
    pytorch, mxnet = experiments
    assert not [k for k in pytorch if k.startswith("mxnet.")]
    assert not [k for k in mxnet if k.startswith("pytorch.")]
    assert "--kv_store device" in mxnet["mxnet.args"]
    assert mxnet["exp.docker_image"] == mxnet["mxnet.docker_image"]


def test_broken_template_of_another_framework_breaks_nothing():
    (experiment,) = plan(params=["mxnet.args=${no.such.name}"])
    assert experiment["exp.framework"] == "pytorch"
    with pytest.raises(ConfigError, match="parameter 'mxnet.args': undefined name"):
        plan(params=["mxnet.args=${no.such.name}", "exp.framework=mxnet"])


def test_data_dir_with_spaces_stays_one_argument():
    (bare,) = plan(params=["exp.data_dir=/my data/imagenet"])
    argv = [word for item in bare["pytorch.args"] for word in shlex.split(item)]
    assert argv[argv.index("--data_dir") + 1] == "/my data/imagenet"
    (docker,) = plan(params=["exp.data_dir=/my data/imagenet", "exp.docker=true"])
    argv = [word for item in docker["pytorch.args"] for word in shlex.split(item)]
    assert argv[argv.index("--data_dir") + 1] == "/workspace/data"
    flags = [word for item in docker["pytorch.docker_args"] for word in shlex.split(item)]
    assert "/my data/imagenet:/workspace/data:ro" in flags
    assert "/opt/dlbs/python/pytorch_benchmarks:/workspace/pytorch_benchmarks:ro" in flags
    assert "/dev/shm/dlbs:/workspace/cuda_cache" in flags
    assert docker["pytorch.env"]["CUDA_CACHE_PATH"] == "/workspace/cuda_cache"


def test_docker_args_string_is_split_like_dlbs():
    (e,) = plan(params=["exp.docker_args=--rm --ipc=host"])
    assert e["exp.docker_args"] == ["--rm", "--ipc=host"]
    assert e["pytorch.docker_args"][:2] == ["--rm", "--ipc=host"]


def test_ids_are_stable_and_leave_out_host_values():
    first = plan(variables=["exp.replica_batch=[16, 32]"])
    again = plan(variables=["exp.replica_batch=[16, 32]"])
    assert [e["exp.id"] for e in first] == [e["exp.id"] for e in again]
    assert len({e["exp.id"] for e in first}) == 2
    elsewhere = plan(variables=["exp.replica_batch=[16, 32]"],
                     env={"DLBS_ROOT": "/elsewhere"},
                     params=["runtime.cuda_cache=/tmp/cache", "runtime.python=/usr/bin/python3"])
    assert [e["exp.id"] for e in first] == [e["exp.id"] for e in elsewhere]
    # The same experiment, reached through -P instead of a sweep, is the same experiment.
    (single,) = plan(params=["exp.replica_batch=32"])
    assert single["exp.id"] == first[1]["exp.id"]
    (other,) = plan(params=["exp.replica_batch=32", "exp.num_batches=7"])
    assert other["exp.id"] != single["exp.id"]


def test_values_from_the_environment_are_not_in_the_id():
    (a,) = plan(params=["my.path=${HOME}/x"], env={**ENV, "HOME": "/home/a"})
    (b,) = plan(params=["my.path=${HOME}/x"], env={**ENV, "HOME": "/home/b"})
    assert a["my.path"] != b["my.path"] and a["exp.id"] == b["exp.id"]


def test_identical_experiments_are_one():
    planner = Planner(load_spec(variables=['exp.dtype=["float32", "float32", "float16"]']), ENV)
    assert len(list(planner.experiments())) == 2
    assert planner.duplicates == 1


def test_no_defaults_adds_nothing(tmp_path: Path):
    spec = tmp_path / "s.json"
    spec.write_text('{"parameters": {"a": 1}, "variables": {"b": [1, 2]}}')
    assert plan(spec, defaults=False) == [{"a": 1, "b": 1}, {"a": 1, "b": 2}]


def test_strong_scaling_example_keeps_the_global_batch():
    experiments = plan(REPO / "examples" / "strong_scaling.yaml")
    assert [e["exp.num_gpus"] for e in experiments] == [1, 2, 4, 8]
    assert [e["exp.replica_batch"] for e in experiments] == [1024, 512, 256, 128]
    assert {e["exp.effective_batch"] for e in experiments} == {1024}
    assert all("--channels_last true" in e["pytorch.args"] for e in experiments)


def test_weak_scaling_example_grows_the_global_batch():
    experiments = plan(REPO / "examples" / "weak_scaling.yaml")
    assert len(experiments) == 8
    assert [e["exp.effective_batch"] for e in experiments[:4]] == [256, 512, 1024, 2048]


def test_batch_size_sweep_example_extension():
    experiments = plan(REPO / "examples" / "batch_size_sweep.yaml")
    assert len(experiments) == 20
    inference = [e for e in experiments if e["exp.phase"] == "inference"]
    assert [e["exp.num_batches"] for e in inference[:5]] == [20, 20, 5, 5, 5]
    assert all("--forward_only true" in e["pytorch.args"] for e in inference)


def test_a_dlbs_style_spec_plans_as_a_dlbs_user_expects():
    experiments = plan(REPO / "examples" / "dlbs_style.json")
    rows = [(e["exp.model"], e["exp.device_type"], e["exp.replica_batch"], e["exp.num_batches"])
            for e in experiments]
    assert rows == [("resnet50", "cpu", 8, 5), ("resnet50", "gpu", 64, 20),
                    ("vgg16", "cpu", 8, 5), ("vgg16", "gpu", 32, 20),
                    ("alexnet_owt", "cpu", 8, 5), ("alexnet_owt", "gpu", 64, 20)]
    first = experiments[0]
    assert first["exp.docker_args"] == ["--rm", "--shm-size=1g", "--ipc=host"]
    assert first["exp.log_file"] == "logs/pytorch/resnet50_8_0.log"
    assert first["monitor.frequency"] == 0.5 and first["my.batch_per_gpu"] == 64
    assert "--batch_size 8" in first["pytorch.args"]
    assert "--cudnn_benchmark true" in first["pytorch.args"]


def test_mxnet_parameter_server_workers_are_replicas_on_the_cpu():
    experiments = plan(REPO / "examples" / "mxnet.yaml")
    by_store = {(e["mxnet.kv_store"], e["exp.phase"]): e for e in experiments}
    assert by_store[("local", "training")]["exp.effective_batch"] == 4
    assert by_store[("dist_sync", "training")]["exp.num_replicas"] == 2
    assert by_store[("dist_sync", "training")]["exp.effective_batch"] == 8
