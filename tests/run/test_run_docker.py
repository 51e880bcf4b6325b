"""`dlbs run` in containers on the real Docker Engine (started by .ci/run)."""

from __future__ import annotations

import pytest

from dlbs.results.protocol import parse_log
from tests.run.conftest import attempts

pytestmark = pytest.mark.docker


def container_spec(test_image) -> list[str]:
    """Run the host's venv inside the local test image (no registry can be reached)."""
    mounts = " ".join(f"-v {m.host}:{m.container}:ro" for m in test_image["mounts"])
    return ["-P", "exp.docker=true", "-P", f"exp.docker_image={test_image['name']}",
            "-P", f"exp.docker_args=--rm --shm-size=256m --ipc=host {mounts}",
            "-P", f"runtime.python={test_image['venv']}/bin/python"]


@pytest.mark.pytorch
def test_pytorch_benchmark_runs_in_a_container(run_dlbs, tmp_path, test_image, docker_client):
    result = run_dlbs("run", *container_spec(test_image), "-P", "exp.model=deep_mnist",
                      "-P", "exp.replica_batch=8", "-P", "exp.num_batches=3",
                      "-P", "exp.num_warmup_batches=1", "-P", "runtime.cuda_cache=",
                      timeout=300)
    assert result.returncode == 0, result.stderr
    (row,) = attempts(tmp_path / "logs" / "results.db")
    assert row[2] == "ok"
    (log,) = (tmp_path / "logs").glob("*.log")
    values = parse_log(log).values
    assert values["exp.model_title"] and values["results.throughput"] > 0
    # The backend ran from the mount, not from the host path.
    assert values["pytorch.args"][0] == "--model deep_mnist"
    leftovers = docker_client.containers.list(all=True,
                                              filters={"label": f"dlbs.exp_id={row[0]}"})
    assert leftovers == []


def test_dummy_in_a_container_with_data_and_spaces(run_dlbs, tmp_path, test_image):
    data = tmp_path / "my data"
    data.mkdir()
    result = run_dlbs("run", *container_spec(test_image), "-P", "exp.framework=dummy",
                      "-P", "dummy.sleep=0", "-P", "exp.num_batches=2",
                      "-P", f"exp.data_dir={data}", "-P", f"runtime.cuda_cache={tmp_path}/cache")
    assert result.returncode == 0, result.stderr
    (log,) = (tmp_path / "logs").glob("*.log")
    assert "data_dir='/workspace/data'" in log.read_text()
    assert (tmp_path / "cache").is_dir()  # the CUDA cache folder was mounted


def test_missing_image_is_found_before_anything_runs(run_dlbs, tmp_path, test_image):
    spec = container_spec(test_image)
    spec[spec.index(f"exp.docker_image={test_image['name']}")] = \
        "exp.docker_image=dlbs-no-such-image:1"
    result = run_dlbs("run", *spec, "-P", "exp.framework=dummy")
    assert result.returncode == 2
    assert "dlbs-no-such-image:1" in result.stderr and "Traceback" not in result.stderr
    assert not list(tmp_path.glob("logs/*.log"))


def test_gpu_request_fails_naming_the_nvidia_runtime(run_dlbs, tmp_path, test_image):
    result = run_dlbs("run", *container_spec(test_image), "-P", "exp.framework=dummy",
                      "-P", "exp.gpus=0")
    assert result.returncode in (1, 2)
    assert "NVIDIA" in result.stderr or "nvidia" in result.stderr
    assert "Traceback" not in result.stderr


# -- stop signals, kill -9 and containers that get the host (issue 14) ------------------------

def _engine(request, engine: str) -> tuple[list[str], object]:
    """The spec options that run the test image on `engine`, and that engine's SDK client."""
    import docker

    if engine == "docker":
        image = request.getfixturevalue("test_image")
        return container_spec(image), request.getfixturevalue("docker_client")
    image = request.getfixturevalue("podman_image")
    client = docker.DockerClient(base_url=image["socket"])
    request.addfinalizer(client.close)
    # The same image as Docker's (copied by .ci/services/podman.sh): the same venv in it.
    image = {**image, "venv": request.getfixturevalue("test_image")["venv"]}
    return [*container_spec(image), "-P", "exp.container_engine=podman",
            "-P", f"runtime.podman_socket={image['socket']}"], client


def _background(tmp_path, *args):
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "run", *args],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _wait_for_backend(tmp_path, limit: float = 180) -> None:
    from tests.run.conftest import wait_until

    wait_until(lambda: any("dummy backend" in log.read_text(errors="replace")
                           for log in (tmp_path / "logs").glob("*.log")),
               "the backend did not start in its container", limit)


LONG = ["-P", "exp.framework=dummy", "-P", "dummy.sleep=1", "-P", "exp.num_batches=3600",
        "-P", "exp.num_warmup_batches=0"]


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_sigterm_stops_and_removes_the_container(request, tmp_path, engine):
    import os
    import signal

    spec, client = _engine(request, engine)
    sweep = _background(tmp_path, *spec, *LONG)
    try:
        _wait_for_backend(tmp_path)
        os.kill(sweep.pid, signal.SIGTERM)
        _, err = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == 143, err
    ((exp_id, _, status, message),) = attempts(tmp_path / "logs" / "results.db")
    assert status == "interrupted" and message.startswith("interrupted: dlbs run got SIGTERM")
    assert client.containers.list(all=True, filters={"label": f"dlbs.exp_id={exp_id}"}) == []


def test_kill_9_then_the_next_run_removes_the_container_whatever_its_name(run_dlbs, tmp_path,
                                                                         test_image,
                                                                         docker_client):
    import os
    import signal
    import uuid

    name = f"dlbs-user-named-{uuid.uuid4().hex[:8]}"
    spec = container_spec(test_image)
    index = next(i for i, item in enumerate(spec) if item.startswith("exp.docker_args="))
    spec[index] += f" --name {name}"
    sweep = _background(tmp_path, *spec, *LONG)
    try:
        _wait_for_backend(tmp_path)
        os.killpg(sweep.pid, signal.SIGKILL)  # dlbs dies; the container keeps running
        sweep.communicate()
        assert docker_client.containers.get(name).status == "running"
        result = run_dlbs("run", *spec, *LONG[:2], "-P", "dummy.sleep=0",
                          "-P", "exp.num_batches=1", "-P", "exp.model=next")
    finally:
        for container in docker_client.containers.list(all=True, filters={"name": name}):
            container.remove(force=True)
    assert result.returncode == 0, result.stderr
    assert f"stopped container {name}, left running by a dlbs run that died" in result.stderr
    (old, new) = attempts(tmp_path / "logs" / "results.db")
    assert (old[2], new[2]) == ("interrupted", "ok")
    assert old[3].endswith(f"the next dlbs run stopped what it left running: container {name}")


def test_flags_that_give_the_container_the_host_are_warned_of_at_run_time(run_dlbs, tmp_path,
                                                                         test_image):
    spec = container_spec(test_image)
    planned = run_dlbs("plan", *spec, "-P", "exp.framework=dummy", "-P", "dummy.sleep=0",
                       "-P", "exp.num_batches=1", "-V", 'exp.model=["a", "b"]',
                       "-o", "plan.json")
    assert planned.returncode == 0, planned.stderr
    quiet = run_dlbs("run", "--plan", "plan.json")
    assert quiet.returncode == 0, quiet.stderr
    assert "warning" not in quiet.stderr  # the default --ipc=host is not warned of
    index = next(i for i, item in enumerate(spec) if item.startswith("exp.docker_args="))
    spec[index] += " --pid=host -v /:/host:ro"
    result = run_dlbs("run", *spec, "-P", "exp.framework=dummy", "-P", "dummy.sleep=0",
                      "-P", "exp.num_batches=1", "-V", 'exp.model=["c", "d"]')
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert warnings == [
        "dlbs: warning: exp.docker_args: --pid=host gives the container every process of the "
        "host, to see and signal (2 experiments; see docs/security.md)",
        "dlbs: warning: exp.docker_args: -v /:/host:ro gives the container the host's / "
        "(2 experiments; see docs/security.md)"]
    # Said once, before the first experiment starts.
    assert result.stderr.index("warning") < result.stderr.index("[1/2]")
    dry = run_dlbs("run", *spec, "-P", "exp.framework=dummy", "-P", "dummy.sleep=0",
                   "-P", "exp.num_batches=1", "-V", 'exp.model=["e", "f"]', "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert [line for line in dry.stderr.splitlines() if "warning" in line] == warnings
