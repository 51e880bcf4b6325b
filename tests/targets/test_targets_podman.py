"""Podman through its Docker-compatible API: the request dlbs makes, and what it refuses.

The container cases themselves run in the conformance suite on both engines; these tests
pin what differs: GPUs as CDI device requests, the version check that keeps a GPU experiment
off a Podman that would drop them, a socket that does not answer, and the plan-time refusal
of Podman with nvidia-docker.
"""

from __future__ import annotations

import json

import pytest

from dlbs.errors import LaunchError
from dlbs.run.targets import get_target
from dlbs.run.targets.docker import PODMAN_CDI_VERSION, DockerTarget
from tests.targets.conftest import make_invocation


def _podman(**extra: object) -> dict:
    return {"exp.id": "pod", "exp.docker": True, "exp.docker_image": "dlbs-test:latest",
            "exp.container_engine": "podman",
            "runtime.podman_socket": "unix:///run/podman/podman.sock", **extra}


def test_gpus_go_to_podman_as_cdi_device_requests():
    target = get_target("docker")
    described = target.describe(make_invocation(_podman(**{"exp.gpus": "0,2"}), ["b"]))
    assert described["kwargs"]["device_requests"] == [
        {"Driver": "cdi", "DeviceIDs": ["nvidia.com/gpu=0", "nvidia.com/gpu=2"],
         "Capabilities": [["gpu"]]}]
    assert described["kwargs"]["environment"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    cli = described["cli"]
    assert cli[:2] == ["podman", "run"]
    assert cli[cli.index("--device") + 1] == "nvidia.com/gpu=0"
    assert "--gpus" not in cli
    assert described["engine_url"] == "unix:///run/podman/podman.sock"


def test_the_podman_socket_defaults_to_roots_service(monkeypatch):
    monkeypatch.delenv("CONTAINER_HOST", raising=False)
    described = get_target("docker").describe(make_invocation(
        {**_podman(), "runtime.podman_socket": ""}, ["b"]))
    assert described["engine_url"] == "unix:///run/podman/podman.sock"  # tests run as root
    monkeypatch.setenv("CONTAINER_HOST", "unix:///elsewhere.sock")
    described = get_target("docker").describe(make_invocation(
        {**_podman(), "runtime.podman_socket": ""}, ["b"]))
    assert described["engine_url"] == "unix:///elsewhere.sock"


@pytest.mark.docker
def test_a_gpu_experiment_is_refused_on_a_podman_that_drops_gpu_requests(podman_image):
    target = get_target("docker")
    assert isinstance(target, DockerTarget)
    try:
        version = target.podman_version(podman_image["socket"])
        invocation = make_invocation(_podman(**{"exp.gpus": "0"}), ["true"])
        if tuple(int(p) for p in version.split(".")[:2]) >= PODMAN_CDI_VERSION:
            pytest.fail(f"this check needs a Podman older than 5.4 (CI installs Debian 12's "
                        f"4.3); this one is {version}")
        with pytest.raises(LaunchError) as caught:
            target.preflight([invocation])
        assert f"Podman {version}'s Docker-compatible API ignores GPU requests" in \
            caught.value.message
        # A CPU experiment on the same Podman passes.
        target.preflight([make_invocation(_podman(), ["true"])])
    finally:
        target.close()


def test_a_podman_socket_that_does_not_answer_is_one_clear_error(tmp_path):
    target = get_target("docker")
    invocation = make_invocation({**_podman(), "runtime.podman_socket": str(tmp_path / "no.sock")},
                                 ["true"])
    with pytest.raises(LaunchError) as caught:
        target.preflight([invocation])
    assert caught.value.message.startswith(
        f"Podman's Docker-compatible API at unix://{tmp_path}/no.sock does not answer")
    assert "podman system service" in caught.value.hint


def test_podman_with_nvidia_docker_is_refused_at_plan_time(dlbs_cli, tmp_path):
    spec = ["-P", "exp.framework=dummy", "-P", "exp.docker=true",
            "-P", "exp.container_engine=podman", "-P", "exp.docker_launcher=nvidia-docker"]
    for command in ("validate", "run"):
        result = dlbs_cli(command, *spec, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "exp.container_engine podman cannot run exp.docker_launcher nvidia-docker" in \
            result.stderr
    assert not (tmp_path / "logs").exists()


def test_a_slurm_job_runs_its_container_with_podman():
    target = get_target("slurm")
    invocation = make_invocation({**_podman(), "exp.scheduler": "slurm",
                                  "exp.log_file": "/l/x.log"}, ["b"])
    script = target.describe(invocation)["script"]
    assert "    podman \\\n    run \\" in script
    assert json.dumps(target.describe(invocation))
