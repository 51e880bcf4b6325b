"""The docker target against the real Docker Engine (started by .ci/services/docker.sh)."""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from dlbs.errors import LaunchError
from dlbs.recipes import Mount
from dlbs.run.targets import get_target
from dlbs.run.targets.docker import DockerTarget
from tests.targets.conftest import make_invocation

pytestmark = pytest.mark.docker


@pytest.fixture
def target(docker_client) -> Iterator[DockerTarget]:
    target = get_target("docker")
    assert isinstance(target, DockerTarget)
    target.kill_grace = 1.0
    yield target
    target.close()


@pytest.fixture
def sink() -> Iterator[BinaryIO]:
    """A log whose content no test reads."""
    with open(os.devnull, "wb") as log:
        yield log


@pytest.fixture
def experiment(test_image) -> dict:
    return {"exp.id": "docker-test", "exp.docker": True, "exp.docker_image": test_image["name"],
            "exp.docker_args": ["--rm --shm-size=256m --ulimit stack=67108864 --ipc=host"]}


def _containers_of(docker_client, exp_id: str) -> list:
    return docker_client.containers.list(all=True, filters={"label": f"dlbs.exp_id={exp_id}"})


# -- before the sweep -------------------------------------------------------------------


def test_preflight_accepts_a_good_sweep(target, experiment):
    target.preflight([make_invocation(experiment, ["true"]),
                      make_invocation(dict(experiment, **{"exp.id": "second"}), ["true"])])


def test_preflight_reports_a_missing_image(target, experiment):
    experiment["exp.docker_image"] = "dlbs-no-such-image:0.0"
    with pytest.raises(LaunchError) as caught:
        target.preflight([make_invocation(experiment, ["true"])])
    assert "image 'dlbs-no-such-image:0.0' is not in the Docker Engine" in caught.value.message
    assert "docker-test" in caught.value.message
    assert "docker pull" in caught.value.hint


def test_preflight_reports_a_daemon_that_does_not_answer(experiment, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    unreachable = DockerTarget()
    with pytest.raises(LaunchError) as caught:
        unreachable.preflight([make_invocation(experiment, ["true"])])
    unreachable.close()
    assert f"the Docker Engine at unix://{tmp_path}/docker.sock does not answer" \
        in caught.value.message
    assert "dockerd" in caught.value.hint


def test_an_unknown_flag_is_refused_before_anything_runs(experiment):
    experiment["exp.docker_args"] = ["--rm --shm-sise=1g"]
    with pytest.raises(LaunchError, match="unknown docker run flag '--shm-sise'"):
        make_invocation(experiment, ["true"])


def test_preflight_reports_a_missing_nvidia_docker(target, experiment, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    experiment["exp.docker_launcher"] = "nvidia-docker"
    with pytest.raises(LaunchError, match="no nvidia-docker on PATH"):
        target.preflight([make_invocation(experiment, ["true"])])


def test_a_gpu_request_fails_naming_the_missing_nvidia_runtime(target, sink, experiment,
                                                               docker_client):
    experiment["exp.gpus"] = "0"
    with pytest.raises(LaunchError) as caught:
        target.preflight([make_invocation(experiment, ["true"])])
    assert "NVIDIA runtime" in caught.value.message
    assert "NVIDIA Container Toolkit" in caught.value.hint
    # And the same when the sweep skipped the check: at run time, nothing left behind.
    with pytest.raises(LaunchError, match="NVIDIA runtime"):
        target.run(make_invocation(experiment, ["true"]), sink, 30)
    assert _containers_of(docker_client, "docker-test") == []
    assert docker_client.containers.list(all=True, filters={"label": "dlbs.probe"}) == []


def test_nvidia_runtime_flag_fails_naming_it(target, experiment):
    experiment.update({"exp.gpus": "0", "exp.docker_args": ["--runtime=nvidia"]})
    with pytest.raises(LaunchError, match="has no NVIDIA runtime"):
        target.preflight([make_invocation(experiment, ["true"])])


# -- running ----------------------------------------------------------------------------


def test_output_streams_into_the_log_and_the_container_is_removed(target, experiment,
                                                                  docker_client, tmp_path):
    shared = tmp_path / "shared dir"
    shared.mkdir()
    script = ('echo "first in=$(pwd) gpus=[${CUDA_VISIBLE_DEVICES-unset}] v=$DLBS_V"; '
              'while [ ! -e /shared/release ]; do sleep 0.05; done; echo second >&2; exit 0')
    invocation = make_invocation(experiment, ["sh", "-c", script], env={"DLBS_V": "a b"},
                                 workdir="/shared", mounts=[Mount(str(shared), "/shared")])
    log_path = tmp_path / "exp.log"
    result = {}
    with open(log_path, "wb") as log:
        log.write(b"header\n")
        worker = threading.Thread(target=lambda: result.update(
            outcome=target.run(invocation, log, 60)))
        worker.start()
        deadline = time.monotonic() + 30
        while b"first" not in log_path.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _containers_of(docker_client, "docker-test"), "the container runs meanwhile"
        (shared / "release").touch()
        worker.join(60)
    outcome = result["outcome"]
    assert outcome.status == "ok", (outcome, log_path.read_text())
    assert log_path.read_text() == "header\nfirst in=/shared gpus=[unset] v=a b\nsecond\n"
    assert outcome.details["container"].startswith("dlbs-docker-test-")
    assert _containers_of(docker_client, "docker-test") == []


def test_the_hosts_python_runs_in_the_test_image(target, experiment, test_image, tmp_path):
    invocation = make_invocation(
        experiment, ["python", "-c", "import sys; print('python', sys.version_info[:2])"],
        mounts=test_image["mounts"])
    log_path = tmp_path / "exp.log"
    with open(log_path, "wb") as log:
        outcome = target.run(invocation, log, 60)
    assert outcome.status == "ok", log_path.read_text()
    assert "python (3, 11)" in log_path.read_text()


@pytest.mark.pytorch
def test_torch_from_the_mounted_venv_runs_in_the_test_image(target, experiment, test_image,
                                                            tmp_path):
    program = ("import torch; x = torch.ones(4, 4); "
               "print('torch', torch.__version__, (x @ x).sum().item())")
    invocation = make_invocation(experiment, ["python3", "-c", program],
                                 mounts=test_image["mounts"], env={"OMP_NUM_THREADS": "1"})
    log_path = tmp_path / "exp.log"
    with open(log_path, "wb") as log:
        outcome = target.run(invocation, log, 120)
    assert outcome.status == "ok", log_path.read_text()
    assert log_path.read_text().strip().endswith(" 64.0")


def test_a_timed_out_container_is_stopped_and_removed(target, sink, experiment, docker_client):
    started = time.monotonic()
    outcome = target.run(make_invocation(experiment, ["sleep", "300"]), sink, 1)
    assert outcome.status == "timeout"
    assert time.monotonic() - started < 15
    assert _containers_of(docker_client, "docker-test") == []


def test_a_container_killed_by_a_signal_is_a_failure_naming_it(target, sink, experiment):
    # The container's PID 1 cannot be killed from inside; a benchmark process under it can.
    outcome = target.run(make_invocation(experiment,
                                         ["sh", "-c", "sh -c 'kill -9 $$'; exit $?"]), sink, 30)
    assert (outcome.status, outcome.returncode) == ("failure", 137)
    assert "SIGKILL" in outcome.message


def test_a_command_missing_in_the_image_is_a_failure(target, sink, experiment, docker_client):
    with pytest.raises(LaunchError, match="did not start"):
        target.run(make_invocation(experiment, ["/no/such/benchmark"]), sink, 30)
    assert _containers_of(docker_client, "docker-test") == []


def test_nvidia_docker_launcher_runs_the_equivalent_command_line(target, experiment,
                                                                 docker_client, tmp_path,
                                                                 monkeypatch):
    # No GPU here, so no real nvidia-docker: a stand-in that does what nvidia-docker 2's
    # wrapper does without GPUs (hand its arguments to the docker CLI) and records NV_GPU.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "nvidia-docker"
    shim.write_text('#!/bin/sh\necho "NV_GPU=[${NV_GPU-unset}]"\nexec docker "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    experiment["exp.docker_launcher"] = "nvidia-docker"
    target.preflight([make_invocation(experiment, ["true"])])
    log_path = tmp_path / "exp.log"
    with open(log_path, "wb") as log:
        outcome = target.run(make_invocation(experiment, ["sh", "-c", 'echo "in [$1] $DLBS_V"',
                                                          "-", "a b"], env={"DLBS_V": "v"}),
                             log, 60)
    assert outcome.status == "ok", log_path.read_text()
    assert log_path.read_text() == "NV_GPU=[unset]\nin [a b] v\n"
    assert _containers_of(docker_client, "docker-test") == []
    described = target.describe(make_invocation(dict(experiment, **{"exp.gpus": "1"}), ["x"]))
    assert described["cli"][0] == "nvidia-docker" and described["env"] == {"NV_GPU": "1"}
    assert "--gpus" not in described["cli"]
    assert Path(shim).exists()
    seen = []
    with open(log_path, "ab") as log:
        outcome = target.run(make_invocation(experiment, ["sleep", "1"]), log, 60,
                             on_start=lambda pid: seen.append(pid))
    assert outcome.status == "ok" and len(seen) == 1 and seen[0] > 1


def test_ctrl_c_stops_and_removes_the_container(target, sink, experiment, docker_client):
    import signal

    # Ctrl-C is pressed once the container runs (started, not only created: a loaded
    # machine can take a while between the two) and the target waits for it (on_start is
    # called there): a KeyboardInterrupt before that would escape into pytest and end the
    # whole session.
    waiting = threading.Event()

    def press_ctrl_c() -> None:
        deadline = time.monotonic() + 60
        while not (waiting.is_set() and any(
                c.status == "running" for c in _containers_of(docker_client, "docker-test"))) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        if waiting.is_set():  # else the run ends at its timeout, and the test fails
            os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c)
    presser.start()
    started = time.monotonic()
    outcome = target.run(make_invocation(experiment, ["sleep", "300"]), sink, 120,
                         on_start=lambda pid: waiting.set())
    presser.join()
    assert outcome.status == "interrupted"
    assert time.monotonic() - started < 30
    assert _containers_of(docker_client, "docker-test") == []


def test_on_start_gets_the_host_pid_of_the_containers_process(target, sink, experiment):
    seen = []
    stop = threading.Event()

    def started(pid: int) -> None:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            seen.append(cmdline.read().split(b"\0")[:2])
        stop.set()  # the container runs until it was looked at, however loaded the machine

    outcome = target.run(make_invocation(experiment, ["sleep", "300"]), sink, 120,
                         on_start=started, stop=stop)
    assert outcome.status == "interrupted"
    assert seen == [[b"sleep", b"300"]]
