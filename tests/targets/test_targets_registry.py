"""The registry of execution targets and the choice of a target for an experiment."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dlbs.errors import LaunchError
from dlbs.recipes import Invocation, target_name
from dlbs.recipes.invocation import requested_gpus, tokens
from dlbs.run.outcome import Outcome
from dlbs.run.targets import (
    ProcessTarget,
    SchedulerTarget,
    base,
    get_target,
    register_target,
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


def test_each_built_in_module_registers_the_name_it_is_found_by():
    for name, module in base.BUILTIN_TARGETS.items():
        assert targets()[name].__module__ == module


def test_a_bare_metal_run_imports_no_other_target():
    """The Docker SDK and Jinja2 are imported only when their targets are asked for."""
    probe = ("import sys; from dlbs.run.targets import get_target; get_target('local'); "
             "print(sorted(m for m in ('docker', 'jinja2', 'requests', 'dlbs.run.targets.docker',"
             " 'dlbs.run.targets.slurm') if m in sys.modules)); get_target('docker'); "
             "print('docker' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[]", "True"]


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
def test_the_target_follows_the_parameters(experiment, name):
    assert target_name(experiment) == name


def test_an_unknown_scheduler_is_refused():
    with pytest.raises(LaunchError, match="unknown scheduler 'pbs'"):
        target_name({"exp.scheduler": "pbs"})


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


def test_docker_and_slurm_register_without_their_python_packages(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    # A Python where importing the Docker SDK and Jinja2 fails, as where they are missing.
    program = (
        "import sys\n"
        "sys.modules['docker'] = None\n"
        "sys.modules['jinja2'] = None\n"
        "from dlbs.errors import LaunchError\n"
        "from dlbs.run.targets import get_target, targets\n"
        "for name, cls in targets().items():\n"
        "    print(name, '|', cls.unavailable)\n"
        "try:\n"
        "    get_target('docker')\n"
        "except LaunchError as error:\n"
        "    print('selected:', error.message)\n")
    repo = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            cwd=tmp_path, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"},
                            timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("docker | the Docker SDK for Python is missing")
    assert "pip install docker==7.2.0" in lines[0]
    assert lines[1] == "local | None"
    assert lines[2].startswith("slurm | Jinja2 is missing")
    assert lines[3].startswith("selected: execution target 'docker' cannot be used here: "
                               "the Docker SDK for Python is missing")
