"""Issue 14 at the command line: hostile specs, plan files and output paths, one error line.

Each test reproduces one defect of the issue as a user meets it (its number in the test's
name): `dlbs` as a subprocess, its exit status and its stderr.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.cli.test_plan_cli import assert_one_error_line
from tests.conftest import REPO

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=2", "-P", "exp.num_warmup_batches=0"]


def one_line(result, *fragments: str) -> None:
    assert_one_error_line(result, *fragments)


# -- 7, 12, 6: refused at plan time by every command that plans ---------------------------------
@pytest.mark.parametrize("command", ["plan", "validate", "run"])
@pytest.mark.parametrize("params, fragment", [
    (["-P", "my param=1"], "invalid parameter name 'my param'"),
    (["-P", "exp.id=../../x"], "is not a valid experiment id"),
    (["-P", "exp.log_dir="], "exp.log_dir is empty"),
    (["-P", "exp.model=../../../../tmp/x"], "leads out of exp.log_dir"),
    (["-P", "exp.model=" + "m" * 10_000], "exp.log_file has a file name of"),
    (["-P", "exp.replica_batch=100000000000000000000000000000000000000"], "above the maximum"),
])
def test_7_12_6_refused_before_anything_runs(dlbs_cli, tmp_path, command, params, fragment):
    result = dlbs_cli(command, *DUMMY, *params, cwd=tmp_path)
    one_line(result, fragment)
    assert not list(tmp_path.iterdir()), "nothing may be written"


def test_6_a_nul_byte_in_a_spec_value(dlbs_cli, tmp_path):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"parameters": {"exp.model": "res\u0000net"}}))
    one_line(dlbs_cli("plan", *DUMMY, "-c", str(spec), cwd=tmp_path), "NUL byte")


def test_9_an_expression_over_budget_names_its_parameter(dlbs_cli, tmp_path):
    result = dlbs_cli("plan", *DUMMY, "-P", "exp.model=$(math.factorial(10**8))$", cwd=tmp_path)
    one_line(result, "parameter 'exp.model'", "expression exceeds a size limit")


def test_13_a_2_to_the_40_sweep_is_refused_at_once(dlbs_cli, tmp_path):
    axes = [arg for i in range(8) for arg in ("-V", f"v{i}={list(range(32))}")]
    result = dlbs_cli("plan", "--no-defaults", *axes, cwd=tmp_path, timeout=60)
    one_line(result, "up to 1,099,511,627,776 experiments", "sys.max_experiments")


# -- 14: a plan file is checked as the planner checks its own output ---------------------------
@pytest.fixture
def plan_file(dlbs_cli, tmp_path) -> Path:
    result = dlbs_cli("plan", *DUMMY, "-V", "exp.replica_batch=[1, 2]", "-o", "plan.json",
                      cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return tmp_path / "plan.json"


def edit(path: Path, **changes) -> None:
    experiments = json.loads(path.read_text())
    for key, value in changes.items():
        key = key.replace("__", ".")
        if value is KeyError:
            del experiments[1][key]
        else:
            experiments[1][key] = value
    path.write_text(json.dumps(experiments))


@pytest.mark.parametrize("changes, fragment", [
    ({"exp__timeout": "10; rm"}, "parameter 'exp.timeout': cannot cast to int: '10; rm' is not"),
    ({"exp__timeout": 10**20}, "above the maximum"),
    ({"exp__status": "maybe"}, "is not one of the choices"),
    ({"exp__replica_batch": 0}, "below the minimum"),
    ({"exp__docker": "yes"}, "'yes' is not a bool"),
    ({"exp__gpus": "0;rm -rf /"}, "does not match the regex"),
    ({"my param": 1}, "invalid parameter name 'my param'"),
    ({"exp__id": "../../x"}, "is not a valid experiment id"),
    ({"exp__log_file": "logs/../../x.log"}, "leads out of exp.log_dir"),
    ({"exp__log_dir": ""}, "exp.log_dir is empty"),
    ({"exp__model": "a\u0000b"}, "NUL byte"),
    ({"dummy__sleep": -1.0}, "below the minimum"),
])
def test_14_a_corrupted_plan_is_refused_before_anything_runs(dlbs_cli, tmp_path, plan_file,
                                                              changes, fragment):
    edit(plan_file, **changes)
    result = dlbs_cli("run", "--plan", str(plan_file), cwd=tmp_path)
    one_line(result, "plan.json: experiment #2", fragment)
    assert not (tmp_path / "logs").exists(), "nothing may run, no attempt may open"


@pytest.mark.parametrize("text, fragment", [
    ('[{"exp.id": "a"}, {"exp.id": "a"}]', "experiments #1 and #2 have the same exp.id"),
    ("[1]", "experiment #1 is not an object"),
    ('{"exp.id": "a"}\n[', "not a plan written by `dlbs plan`"),
    ('[{"x": NaN}]', "not a plan written by `dlbs plan`"),
    ('[{"x": 1e400}]', "not a plan written by `dlbs plan`"),
    ('[{"x": 100000000000000000000000}]', "does not fit in 64 bits"),
    ("[" * 50_000 + "]" * 50_000, "not a plan written by `dlbs plan`"),
    ('"plan"', "experiment #1 is not an object"),
])
def test_14_malformed_plan_files(dlbs_cli, tmp_path, text, fragment):
    (tmp_path / "plan.json").write_text(text)
    one_line(dlbs_cli("run", "--plan", "plan.json", cwd=tmp_path), fragment)


def test_14_a_plan_from_a_pipe_still_runs(dlbs_cli, tmp_path, plan_file):
    script = (f"{sys.executable} -m dlbs.cli.main run --plan <(cat {plan_file}) --dry-run "
              "--format json")
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2


def test_14_a_device_is_not_a_plan(dlbs_cli, tmp_path):
    one_line(dlbs_cli("run", "--plan", "/dev/zero", cwd=tmp_path), "not a regular file")


# -- 15: -o writes atomically over a regular file, through a device or FIFO, never a folder ----
def test_15_output_to_dev_full_leaves_the_device(dlbs_cli, tmp_path):
    result = dlbs_cli("plan", *DUMMY, "-o", "/dev/full", cwd=tmp_path)
    one_line(result, "cannot write /dev/full", "No space left on device")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_15_output_through_a_symlink_replaces_its_target(dlbs_cli, tmp_path):
    target = tmp_path / "target.json"
    target.write_text("old")
    (tmp_path / "link.json").symlink_to(target)
    result = dlbs_cli("plan", *DUMMY, "-o", "link.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "link.json").is_symlink()
    assert json.loads(target.read_text())[0]["exp.framework"] == "dummy"


def test_15_output_to_a_fifo_is_written_through(dlbs_cli, tmp_path):
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = dlbs_cli("plan", *DUMMY, "-o", str(fifo), cwd=tmp_path)
    reader.join(60)
    assert result.returncode == 0, result.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(received[0])[0]["exp.framework"] == "dummy"


def test_15_output_to_a_folder_is_refused(dlbs_cli, tmp_path):
    (tmp_path / "out").mkdir()
    one_line(dlbs_cli("plan", *DUMMY, "-o", "out", cwd=tmp_path), "it is a folder")


@pytest.mark.parametrize("command", [["parse"], ["report", "--format", "csv"]])
def test_15_every_output_option_writes_through_the_atomic_writer(dlbs_cli, tmp_path, command):
    log = tmp_path / "a.log"
    log.write_text('__exp.id__="a"\n__exp.framework__="dummy"\n__exp.model__="m"\n'
                   '__results.status__="ok"\n__results.time__=1.0\n__results.throughput__=2.0\n')
    result = dlbs_cli(*command, str(log), "-o", "/dev/full", cwd=tmp_path)
    one_line(result, "cannot write /dev/full")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_15_every_cli_output_option_uses_the_atomic_writer():
    """Each command with -o/--output writes through dlbs.util.atomic, never open().

    Directly, or through `dlbs.cli.output.emit`, which writes with `atomic_write`.
    """
    assert "atomic_write(output" in (REPO / "dlbs" / "cli" / "output.py").read_text()
    for path in sorted((REPO / "dlbs" / "cli").glob("*.py")):
        text = path.read_text()
        if '"--output"' in text:
            assert "atomic_write" in text or "emit(text, " in text, \
                f"{path.name}: -o must use dlbs.util.atomic"
            assert "open(args.output" not in text and "open(output" not in text, path.name


# -- 18: a closed stdout is a reader that left -------------------------------------------------
@pytest.mark.parametrize("command", [["plan", *DUMMY], ["validate", *DUMMY], ["help"],
                                     ["list", "models"]])
def test_18_closed_stdout_exits_quietly(tmp_path, command):
    script = f"{sys.executable} -m dlbs.cli.main {' '.join(command)} >&-"
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and result.stderr == ""


# -- the container flags that give the host: warned about when the plan is made ----------------
HOST_FLAGS = ["--privileged", "-v /:/host", "--pid=host", "--cap-add=ALL", "--network=host",
              "--security-opt seccomp=unconfined", "-v /var/run/docker.sock:/s.sock",
              "--device /dev/sda", "--mount type=bind,source=/etc,target=/e", "--ipc=host",
              "-v data:/data", "-v /home/me/data:/data2"]


@pytest.mark.parametrize("command", ["plan", "validate"])
def test_host_access_flags_are_warned_at_plan_time(dlbs_cli, tmp_path, command):
    result = dlbs_cli(command, *DUMMY, "-P", "exp.docker=true", "-V", "exp.replica_batch=[1, 2]",
                      "-P", "exp.docker_args=" + json.dumps(HOST_FLAGS), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "exp.docker_args:" in line]
    for flag in ("--privileged", "-v /:/host", "--pid=host", "--cap-add=ALL", "--network=host",
                 "--security-opt=seccomp=unconfined", "-v /var/run/docker.sock:/s.sock",
                 "--device /dev/sda", "--mount source=/etc"):
        assert any(line.startswith(f"dlbs: warning: exp.docker_args: {flag} gives")
                   and "(2 experiments; see docs/security.md)" in line
                   for line in warnings), (flag, warnings)
    assert len(warnings) == 9, warnings  # not --ipc=host, nor named volumes, nor /home/me


def test_host_access_default_args_and_bare_metal_are_quiet(dlbs_cli, tmp_path):
    docker = dlbs_cli("plan", *DUMMY, "-P", "exp.docker=true", cwd=tmp_path)
    bare = dlbs_cli("plan", *DUMMY, "-P", 'exp.docker_args=["--privileged"]', cwd=tmp_path)
    assert docker.returncode == 0 and bare.returncode == 0
    assert "exp.docker_args:" not in docker.stderr + bare.stderr
