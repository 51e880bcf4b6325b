"""Issue 24 (hardening, round three) at the command line: each defect as a user meets it.

The item's number is in each test's name; `dlbs` runs as a subprocess and is judged by its
exit status, its output and what it left on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_plan_cli import assert_one_error_line

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=2", "-P", "exp.num_warmup_batches=0",
         "-P", "exp.model=resnet18", "-V", "exp.replica_batch=[1,2]"]


# -- 1: every file a run writes is contained and never shared ---------------------------------
def test_1_a_trace_never_replaces_another_experiment_s_log(dlbs_cli, tmp_path):
    other = tmp_path / "logs" / "other.log"
    other.parent.mkdir()
    other.write_text("__exp.id__=\"other\"\n__results.time__=1.0\n")
    result = dlbs_cli("run", *DUMMY, "-V", "exp.replica_batch=[1]", "-P", "exp.trace_level=step",
                      "-P", f"exp.trace_file={other}", cwd=tmp_path)
    assert_one_error_line(result, "exp.trace_file", "is a file that is not a trace dlbs wrote")
    assert other.read_text() == "__exp.id__=\"other\"\n__results.time__=1.0\n"
    assert not list(other.parent.glob("dummy_*.log")), "nothing may have run"


@pytest.mark.parametrize("command", ["validate", "run"])
def test_1_a_constant_trace_file_across_a_sweep_is_refused(dlbs_cli, tmp_path, command):
    result = dlbs_cli(command, *DUMMY, "-P", "exp.trace_level=step",
                      "-P", "exp.trace_file=logs/one.trace.json.gz", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "experiments #1 and #2 write the same trace file 'logs/one.trace.json.gz'" in \
        result.stdout + result.stderr
    assert not (tmp_path / "logs").exists() or not list((tmp_path / "logs").glob("*.log"))


def test_1_a_traced_sweep_writes_one_trace_per_experiment(dlbs_cli, tmp_path):
    result = dlbs_cli("run", *DUMMY, "-P", "exp.trace_level=step", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(list((tmp_path / "logs").glob("*.trace.json.gz"))) == 2


# -- 7: `run --plan` checks what `run --config` checks ------------------------------------------
def _plan(dlbs_cli, tmp_path: Path, *params: str) -> list[dict]:
    result = dlbs_cli("plan", *DUMMY, *params, "-o", "plan.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads((tmp_path / "plan.json").read_text())


@pytest.mark.parametrize("name, fragment", [
    ("exp.log_file", "experiments #1 and #2 write the same log file"),
    ("exp.trace_file", "experiments #1 and #2 write the same trace file"),
])
def test_7_run_plan_refuses_two_experiments_writing_one_file(dlbs_cli, tmp_path, name,
                                                                fragment):
    plan = _plan(dlbs_cli, tmp_path, "-P", "exp.trace_level=step")
    plan[1][name] = plan[0][name]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    for extra in ([], ["--dry-run"]):
        result = dlbs_cli("run", "--plan", "plan.json", *extra, cwd=tmp_path)
        assert_one_error_line(result, fragment)
    assert not (tmp_path / "logs").exists()
