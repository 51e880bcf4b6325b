"""`dlbs plan` and `dlbs validate` on DLBS-style specs: warnings, and all-or-nothing output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# A DLBS user's spec with a DLBS setting dlbs does not have, and helper variables of its own
# (used, and unused but outside dlbs's namespaces).
DLBS_SPEC = {
    "parameters": {
        "exp.framework": "pytorch",
        "mxnet.use_dali": True,
        "global_batch": 1024,
        "exp.replica_batch": "$(${global_batch} // ${exp.num_replicas})$",
        "note": "a label of my own",
        "exp.num_batches": 5,
    },
    "variables": {"exp.gpus": ["", "0", "0,1"]},
}
WARNINGS = [
    "dlbs: warning: {spec}: parameter 'mxnet.use_dali' is DLBS's, and nothing in dlbs reads it "
    "(the MXNet backend reads RecordIO with ImageRecordIter, not DALI)",
]


@pytest.fixture
def dlbs_spec(tmp_path: Path) -> Path:
    path = tmp_path / "dlbs_spec.json"
    path.write_text(json.dumps(DLBS_SPEC))
    return path


def test_plan_warns_once_per_unread_parameter(dlbs_cli, dlbs_spec):
    result = dlbs_cli("plan", "-c", str(dlbs_spec))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [w.format(spec=dlbs_spec) for w in WARNINGS]
    experiments = json.loads(result.stdout)
    assert [e["exp.replica_batch"] for e in experiments] == [1024, 1024, 512]


def test_validate_warns_on_stderr_and_reports_on_stdout(dlbs_cli, dlbs_spec):
    # The plan alone: its GPU experiments are checked against a GPU machine's nvidia-smi in
    # tests/run/test_host_check.py.
    result = dlbs_cli("validate", "--plan-only", "-c", str(dlbs_spec))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "plan: 3 experiments\nok\n"
    assert result.stderr.splitlines() == [w.format(spec=dlbs_spec) for w in WARNINGS]


# The slips of issue 30, each in another place of a spec: one error line before anything runs.
SLIPS = [
    ({"variables": {"exp.replica_bach": [8, 16]}}, [],
     "parameter 'exp.replica_bach' (nearest: exp.replica_batch)"),
    ({"parameters": {"exp.modle": "resnet18"}}, [], "parameter 'exp.modle' (nearest: exp.model,"),
    ({}, ["-P", "exp.num_batchs=5"], "parameter 'exp.num_batchs' (nearest: exp.num_batches,"),
    ({}, ["-P", "exp.target=slurm"], "parameter 'exp.target' (nearest: exp.target_qps)"),
    ({}, ["-V", "pytorch.num_thread=[1,2]"], "parameter 'pytorch.num_thread' (nearest: "
                                              "pytorch.num_threads,"),
    ({"extensions": [{"condition": {"exp.model": "resnet50"},
                      "parameters": {"runtime.max_paralel": 2}}]}, [],
     "parameter 'runtime.max_paralel' (nearest: runtime.max_parallel)"),
    ({"extensions": [{"condition": {"dummy.sleeep": 1}, "parameters": {"x": 1}}]}, [],
     "parameter 'dummy.sleeep' (nearest: dummy.sleep)"),
]


# Each command meets a few of them (the check is one function that every command calls).
COMMANDS = ["plan", "validate", "run", "print-config"]


@pytest.mark.parametrize(("spec", "options", "said", "command"),
                         [(*slip, COMMANDS[i % len(COMMANDS)]) for i, slip in enumerate(SLIPS)])
def test_a_slip_in_dlbs_namespaces_is_one_error_before_anything_runs(
        dlbs_cli, tmp_path, spec, options, said, command):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"parameters": {"exp.framework": "dummy", **spec.get(
        "parameters", {})}, **{k: v for k, v in spec.items() if k != "parameters"}}))
    result = dlbs_cli(command, "-c", str(path), *options, cwd=tmp_path)
    [line, hint] = result.stderr.splitlines()
    assert result.returncode == 2 and result.stdout == ""
    assert line.startswith("dlbs: error: ") and said in line and \
        line.endswith("is not declared by any config"), line
    assert hint.startswith("hint: a name in dlbs's namespaces (") and \
        "a name of your own belongs outside them" in hint
    assert not (tmp_path / "logs").exists()


def test_a_clean_spec_plans_without_a_word(dlbs_cli, tmp_path):
    path = tmp_path / "clean.json"
    path.write_text(json.dumps({"parameters": {"exp.framework": "mxnet",
                                               "mxnet.cudnn_autotune": "false",
                                               "exp.use_tensor_core": True}}))
    for command in ("plan", "validate"):
        result = dlbs_cli(command, "-c", str(path))
        assert result.returncode == 0 and result.stderr == "", result.stderr


# The third experiment of five fails to resolve.
FAILS_THIRD = """
variables: {m: [one, two, bad, four, five]}
parameters: {x: "$(1 if '${m}' != 'bad' else 1 / 0)$"}
"""


@pytest.mark.parametrize("fmt", ["json", "csv", "table"])
def test_documents_are_all_or_nothing(dlbs_cli, tmp_path, fmt):
    path = tmp_path / "fails.yaml"
    path.write_text(FAILS_THIRD)
    result = dlbs_cli("plan", "-c", str(path), "--no-defaults", "--format", fmt)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines()[0].startswith("dlbs: error: ")
    assert "experiment: m=bad" in result.stderr and "written" not in result.stderr


def test_jsonl_streams_what_resolved_before_the_failure(dlbs_cli, tmp_path):
    path = tmp_path / "fails.yaml"
    path.write_text(FAILS_THIRD)
    result = dlbs_cli("plan", "-c", str(path), "--no-defaults", "--format", "jsonl")
    assert result.returncode == 2
    assert [json.loads(line)["m"] for line in result.stdout.splitlines()] == ["one", "two"]
    assert "(after 2 experiments were written)" in result.stderr


def test_a_large_json_plan_is_written_whole(dlbs_cli, tmp_path):
    path = tmp_path / "large.yaml"
    path.write_text("variables: {a: " + json.dumps(list(range(300))) + ", b: [x, y, z]}\n")
    result = dlbs_cli("plan", "-c", str(path), "--no-defaults")
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)) == 900
