"""One suite every execution target runs through: the contract the run loop relies on.

Each case runs for real on its target: a child process, a container of the Docker Engine
started by `.ci/services/docker.sh`, a container of Podman through its Docker-compatible API
(`.ci/services/podman.sh`; the same target and code path, `exp.container_engine: podman`), a
job of the SLURM cluster started by `.ci/services/slurm.sh`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dlbs.run.targets import get_target
from tests.targets.conftest import make_invocation

TARGETS = [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
    pytest.param("podman", id="podman", marks=pytest.mark.docker),
    pytest.param("slurm", id="slurm", marks=pytest.mark.slurm),
]


@pytest.fixture(params=TARGETS)
def target_and_experiment(request: pytest.FixtureRequest,
                          tmp_path: Path) -> Iterator[tuple[Any, dict]]:
    """A target, its service checked, and a minimal experiment for it."""
    name = request.param
    experiment: dict[str, Any] = {"exp.id": f"conformance-{name}",
                                  "exp.log_file": str(tmp_path / "exp.log")}
    if name == "docker":
        image = request.getfixturevalue("test_image")
        experiment.update({"exp.docker": True, "exp.docker_image": image["name"],
                           "exp.docker_args": ["--rm --ipc=host"]})
    if name == "podman":
        image = request.getfixturevalue("podman_image")
        experiment.update({"exp.docker": True, "exp.docker_image": image["name"],
                           "exp.container_engine": "podman",
                           "runtime.podman_socket": image["socket"],
                           "exp.docker_args": ["--rm --ipc=host --shm-size=1g"]})
        name = "docker"  # one target, two engines
    if name == "slurm":
        request.getfixturevalue("slurm_cluster")
        experiment["exp.scheduler"] = "slurm"
    target = get_target(name)
    target.kill_grace = 1.0  # type: ignore[attr-defined]
    target.preflight([make_invocation(experiment, ["true"])])
    yield target, experiment
    target.close()


def test_output_and_environment_reach_the_log(target_and_experiment, run_to_end, tmp_path):
    target, experiment = target_and_experiment
    experiment["runtime.env.DLBS_FROM_PARAM"] = "param value"
    script = ('echo "__results.time__=12.5"; echo "arg=[$1]" "param=[$DLBS_FROM_PARAM]"'
              ' "recipe=[$DLBS_FROM_RECIPE]"; echo to-stderr >&2')
    invocation = make_invocation(experiment, ["sh", "-c", script, "dlbs", "two words $HOME ;|"],
                                 env={"DLBS_FROM_RECIPE": "it's quoted"})
    log = tmp_path / "exp.log"
    outcome = run_to_end(target, invocation, log, timeout=120)
    text = log.read_text()
    assert outcome.status == "ok", (outcome, text)
    assert text.startswith('__exp.id__="header"\n'), text
    assert "__results.time__=12.5\n" in text
    assert "arg=[two words $HOME ;|] param=[param value] recipe=[it's quoted]" in text
    assert "to-stderr" in text


def test_a_failing_command_is_a_failure_with_its_status(target_and_experiment, run_to_end,
                                                        tmp_path):
    target, experiment = target_and_experiment
    outcome = run_to_end(target, make_invocation(experiment, ["sh", "-c", "echo dying; exit 3"]),
                         tmp_path / "exp.log", timeout=120)
    assert outcome.status == "failure"
    assert outcome.returncode == 3
    assert "3" in outcome.message
    assert "dying" in (tmp_path / "exp.log").read_text()


def test_a_hung_command_ends_with_timeout(target_and_experiment, run_to_end, tmp_path):
    target, experiment = target_and_experiment
    hung = make_invocation(experiment, ["sh", "-c", "echo started; sleep 300"])
    outcome = run_to_end(target, hung, tmp_path / "exp.log", timeout=2)
    assert outcome.status == "timeout", outcome
    assert "timeout" in outcome.message
    assert "started" in (tmp_path / "exp.log").read_text()


def test_describe_is_json_data_naming_the_command(target_and_experiment):
    import json

    target, experiment = target_and_experiment
    described = target.describe(make_invocation(experiment, ["echo", "a b"]))
    assert described["target"] == target.name
    assert "a b" in json.dumps(described)
    if experiment.get("exp.container_engine") == "podman":
        assert described["engine"] == "podman" and described["cli"][:2] == ["podman", "run"]
        # Podman refuses a shm size with the host's IPC namespace: left out, and said so.
        assert "shm_size" not in described["kwargs"]
        assert any("--shm-size" in reason for reason in described["ignored"])
