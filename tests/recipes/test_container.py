"""One container request, rendered for the Docker SDK and as a `docker run` line."""

from __future__ import annotations

import pytest

from dlbs.errors import LaunchError
from dlbs.recipes import Mount, assemble
from dlbs.recipes.container import cli_argv, sdk_request


@pytest.fixture
def experiment() -> dict:
    return {"exp.id": "docker-test", "exp.docker": True, "exp.docker_image": "dlbs-test:latest",
            "exp.docker_args": ["--rm --shm-size=256m --ulimit stack=67108864 --ipc=host"]}


def test_gpus_are_requested_by_id_and_renumbered_inside(experiment):
    invocation = assemble(dict(experiment, **{"exp.gpus": "2,5"}), ["python"])
    kwargs = sdk_request(invocation)["kwargs"]
    assert kwargs["device_requests"] == [{"Driver": "nvidia", "DeviceIDs": ["2", "5"],
                                          "Capabilities": [["gpu"]]}]
    assert kwargs["environment"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    cli = cli_argv(invocation)
    assert cli[cli.index("--gpus") + 1] == '"device=2,5"'
    assert cli[cli.index("-e", cli.index("--ipc=host")) + 1] == "CUDA_VISIBLE_DEVICES=0,1"


def test_nvidia_runtime_selects_gpus_through_its_variable(experiment):
    experiment.update({"exp.docker_args": ["--runtime=nvidia"], "exp.gpus": "3"})
    kwargs = sdk_request(assemble(experiment, ["python"]))["kwargs"]
    assert "device_requests" not in kwargs
    assert kwargs["runtime"] == "nvidia"
    assert kwargs["environment"]["NVIDIA_VISIBLE_DEVICES"] == "3"
    assert kwargs["environment"]["CUDA_VISIBLE_DEVICES"] == "0"


def test_gpus_flag_in_docker_args_conflicts_with_exp_gpus(experiment):
    experiment.update({"exp.docker_args": ["--gpus all"], "exp.gpus": "0"})
    with pytest.raises(LaunchError, match="--gpus conflicts with exp.gpus"):
        assemble(experiment, ["python"])


def test_request_layers_environment_mounts_and_workdir(experiment):
    experiment.update({"exp.docker_args": ["-e A=user -e B=user -w /user"],
                       "runtime.env.B": "param", "runtime.launcher": "env X=1"})
    invocation = assemble(experiment, ["python", "bench.py"], env={"C": "recipe"},
                          mounts=[Mount("/host/a b", "/workspace/code", read_only=True)])
    invocation.workdir = "/recipe"
    request = sdk_request(invocation)
    kwargs = request["kwargs"]
    assert kwargs["environment"] == {"A": "user", "B": "param", "C": "recipe"}
    assert kwargs["working_dir"] == "/user"
    assert kwargs["mounts"] == [{"Target": "/workspace/code", "Source": "/host/a b",
                                 "Type": "bind", "ReadOnly": True}]
    assert kwargs["labels"] == {"dlbs.exp_id": "docker-test"}
    assert request["command"] == ["env", "X=1", "python", "bench.py"]
    cli = cli_argv(invocation)
    assert cli[:3] == ["docker", "run", "--rm"]
    assert cli[-5:] == [experiment["exp.docker_image"], "env", "X=1", "python", "bench.py"]
    assert "/host/a b:/workspace/code:ro" in cli
    assert "-w" not in cli[cli.index("/user"):]  # the user's -w wins, as in the SDK request


def test_the_sdk_request_and_the_command_line_say_the_same(experiment):
    """Both renderings come from one object: same name, labels, environment, flags."""
    experiment.update({"exp.gpus": "1", "runtime.env.V": "x y"})
    invocation = assemble(experiment, ["python", "b.py"])
    kwargs = sdk_request(invocation)["kwargs"]
    cli = cli_argv(invocation)
    assert cli[cli.index("--name") + 1] == kwargs["name"]
    assert kwargs["name"].startswith("dlbs-docker-test-")
    assert cli[cli.index("--label") + 1] == "dlbs.exp_id=docker-test"
    passed = {cli[i + 1] for i, token in enumerate(cli) if token == "-e"}
    assert passed == {f"{k}={v}" for k, v in kwargs["environment"].items()}
    assert kwargs["shm_size"] == "256m" and "--shm-size=256m" in cli


def test_a_task_rendering_has_no_fixed_name_and_passes_its_ranks(experiment):
    cli = cli_argv(assemble(experiment, ["python"]), named=False, pass_env=["RANK", "WORLD_SIZE"])
    assert "--name" not in cli
    image = cli.index(experiment["exp.docker_image"])
    assert cli[image - 4:image] == ["-e", "RANK", "-e", "WORLD_SIZE"]


def test_a_users_name_is_kept(experiment):
    experiment["exp.docker_args"] = ["--name mine"]
    invocation = assemble(experiment, ["python"])
    assert sdk_request(invocation)["kwargs"]["name"] == "mine"
    cli = cli_argv(invocation)
    assert cli.count("--name") == 1 and cli[cli.index("--name") + 1] == "mine"


def test_a_bare_metal_experiment_has_no_container():
    invocation = assemble({"exp.id": "e"}, ["python"])
    assert invocation.container is None and invocation.target == "local"
    with pytest.raises(ValueError, match="has no container"):
        sdk_request(invocation)
