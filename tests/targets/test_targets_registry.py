"""The registry of execution targets and the choice of a target for an experiment."""

from __future__ import annotations

import pytest

from dlbs.errors import LaunchError
from dlbs.run.invocation import Invocation, Outcome, requested_gpus, tokens
from dlbs.run.targets import (
    ProcessTarget,
    SchedulerTarget,
    base,
    get_target,
    register_target,
    target_for,
    targets,
)


@pytest.fixture
def registry(monkeypatch):
    """A copy of the registry that the test may change."""
    base.targets()
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))


def test_the_three_built_in_targets_are_registered():
    found = targets()
    assert list(found) == ["docker", "local", "slurm"]
    assert issubclass(found["local"], ProcessTarget)
    assert issubclass(found["docker"], ProcessTarget)
    assert issubclass(found["slurm"], SchedulerTarget)
    assert all(cls.summary and cls.unavailable is None for cls in found.values())


def test_a_duplicate_name_raises(registry):
    with pytest.raises(ValueError, match="'local' is already registered by "
                                         "dlbs.run.targets.local.LocalTarget"):
        @register_target("local")
        class Another(ProcessTarget):
            pass


def test_a_target_with_a_missing_dependency_registers_and_says_why_when_chosen(registry):
    @register_target("flux", unavailable="the flux Python bindings are missing")
    class Flux(SchedulerTarget):
        summary = "Flux jobs"

    assert targets()["flux"] is Flux
    with pytest.raises(LaunchError, match="target 'flux' cannot be used here: the flux Python "
                                          "bindings are missing"):
        get_target("flux")


def test_an_unknown_target_lists_the_known_ones():
    with pytest.raises(LaunchError) as caught:
        get_target("kubernetes")
    assert "unknown execution target 'kubernetes'" in caught.value.message
    assert "docker, local, slurm" in caught.value.hint


@pytest.mark.parametrize(("experiment", "name"), [
    ({}, "local"),
    ({"exp.docker": False}, "local"),
    ({"exp.docker": True}, "docker"),
    ({"exp.docker": "true"}, "docker"),
    ({"exp.scheduler": "none", "exp.docker": True}, "docker"),
    ({"exp.scheduler": "slurm", "exp.docker": True}, "slurm"),
    ({"exp.scheduler": "slurm"}, "slurm"),
])
def test_target_for_follows_the_parameters(experiment, name):
    assert target_for(experiment) == name


def test_target_for_refuses_an_unknown_scheduler():
    with pytest.raises(LaunchError, match="unknown scheduler 'pbs'"):
        target_for({"exp.scheduler": "pbs"})


@pytest.mark.parametrize(("value", "expected"), [
    ("--rm --ipc=host", ["--rm", "--ipc=host"]),
    (["--rm", "-v '/a b:/c'"], ["--rm", "-v", "/a b:/c"]),
    ("", []), (None, []), ([], []),
])
def test_argument_lists_split_as_a_shell_would_without_evaluating(value, expected):
    assert tokens(value, "exp.docker_args") == expected


def test_an_unclosed_quote_is_a_launch_error_naming_the_parameter():
    with pytest.raises(LaunchError, match="runtime.launcher: cannot split"):
        tokens("numactl '--cpunodebind=0", "runtime.launcher")


@pytest.mark.parametrize(("gpus", "ids"), [
    ("", []), ("0", ["0"]), ("0,1", ["0", "1"]), ("0:1,2:3", ["0", "1", "2", "3"]),
    (["0", "3"], ["0", "3"]), (0, ["0"])])
def test_requested_gpus(gpus, ids):
    assert requested_gpus({"exp.gpus": gpus}) == ids


def test_outcome_refuses_an_unknown_status():
    with pytest.raises(ValueError, match="unknown outcome status 'skipped'"):
        Outcome("skipped")
    assert Invocation(["x"]).gpus == [] and Invocation(["x"]).nodes == 1
