"""Fixtures for the execution-target tests: the real Docker Engine and the real SLURM cluster.

The fixtures only check that the services are up; `.ci/run` starts them with the scripts in
`.ci/services/`. A service that is down FAILS the tests that need it, with the command that
starts it: these tests never pass by skipping.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dlbs.recipes import Invocation, Mount, assemble
from dlbs.run.outcome import Outcome
from dlbs.run.targets import ProcessTarget, SchedulerTarget, Target
from tests import runs

REPO = Path(__file__).resolve().parents[2]
TEST_IMAGE = runs.TEST_IMAGE
PODMAN_SOCKET = "unix:///run/podman/podman.sock"


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A Docker SDK client of the running engine; fails if there is none."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as error:  # any failure here means: the engine is not usable
        pytest.fail(f"the Docker Engine is not running ({error}); start it with "
                    "`bash .ci/services/docker.sh` (as root)", pytrace=False)
    runs.sweep_containers(client)
    yield client
    client.close()


@pytest.fixture(scope="session")
def test_image(docker_client: Any) -> dict[str, Any]:
    """The local test image and the read-only mounts that give it a Python interpreter."""
    import docker.errors

    try:
        image = docker_client.images.get(TEST_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"image {TEST_IMAGE} is missing; build it with "
                    "`bash .ci/services/test-image.sh`", pytrace=False)
    labels = image.labels or {}
    mounts = [Mount(labels[key], labels[key], read_only=True)
              for key in ("dlbs.venv", "dlbs.python_home") if labels.get(key)]
    return {"name": TEST_IMAGE, "mounts": mounts, "venv": labels.get("dlbs.venv")}


@pytest.fixture(scope="session")
def podman_image() -> dict[str, Any]:
    """The test image in Podman's store, served by its Docker-compatible API; fails if not."""
    import docker
    import docker.errors

    try:
        client = docker.DockerClient(base_url=PODMAN_SOCKET)
        client.ping()
    except Exception as error:  # any failure here means: the API does not answer
        pytest.fail(f"Podman's API at {PODMAN_SOCKET} does not answer ({error}); start it "
                    "with `bash .ci/services/podman.sh` (as root)", pytrace=False)
    try:
        runs.sweep_containers(client)
        image = client.images.get(TEST_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"image {TEST_IMAGE} is not in Podman's store; import it with "
                    "`bash .ci/services/podman.sh`", pytrace=False)
    finally:
        client.close()
    labels = image.labels or {}
    mounts = [Mount(labels[key], labels[key], read_only=True)
              for key in ("dlbs.venv", "dlbs.python_home") if labels.get(key)]
    return {"name": TEST_IMAGE, "mounts": mounts, "socket": PODMAN_SOCKET}


@functools.cache
def _slurm_up() -> dict[str, str]:
    """The test cluster's node states, looked at once a process; fails unless all answer."""
    if shutil.which("sbatch") is None:
        pytest.fail("SLURM is not installed; run `bash .ci/services/slurm.sh` (as root)",
                    pytrace=False)
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    if " is UP" not in ping.stdout:
        pytest.fail(f"slurmctld does not answer ({ping.stdout.strip() or ping.stderr.strip()}); "
                    "start it with `bash .ci/services/slurm.sh`", pytrace=False)
    nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True,
                           text=True, timeout=30).stdout.split("\n")
    states = dict(line.split() for line in nodes if line.strip())
    for node in ("node1", "node2"):
        if states.get(node, "").rstrip("*~#") not in ("idle", "mix", "alloc", "comp"):
            pytest.fail(f"SLURM node {node} is not up ({states}); start it with "
                        "`bash .ci/services/slurm.sh`", pytrace=False)
    runs.sweep_jobs()
    return states


@pytest.fixture
def slurm_cluster(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The two-node test cluster; the jobs a test leaves in its tmp_path are cancelled after it.

    Some tests measure where and when their jobs run on the two nodes: a job an earlier test
    left running would take one (`runs.cancel_jobs_in`).
    """
    yield _slurm_up()
    runs.cancel_jobs_in(tmp_path)


def make_invocation(experiment: dict[str, Any], argv: list[str], *,
                    env: dict[str, str] | None = None, mounts: list[Mount] | None = None,
                    workdir: str | None = None) -> Invocation:
    """The invocation of `argv` for an experiment, as a recipe would complete it."""
    invocation = assemble(experiment, argv, env=env, mounts=mounts or [])
    invocation.workdir = workdir
    return invocation


def _run_to_end(target: Target, invocation: Invocation, log_path: Path,
                timeout: float | None = None) -> Outcome:
    """Run an invocation through any kind of target, as the run loop will.

    The log starts with a header line, as the run loop's logs do, then gets the output.
    """
    log_path.write_bytes(b"__exp.id__=\"header\"\n")
    if isinstance(target, SchedulerTarget):
        job_id = target.submit(invocation, str(log_path))
        return target.wait(job_id, timeout)
    assert isinstance(target, ProcessTarget)
    with open(log_path, "ab") as log:
        return target.run(invocation, log, timeout)


@pytest.fixture
def run_to_end() -> Any:
    """`run_to_end(target, invocation, log_path, timeout)` -> Outcome."""
    return _run_to_end
