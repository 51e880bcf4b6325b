"""`dlbs plan`, `validate`, `print-config`, `help` and `list` as a user runs them."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from dlbs.cli.main import main

SPEC = """
parameters:
  exp.num_batches: 5
variables:
  exp.model: [resnet18, alexnet_owt]
  exp.replica_batch: [2, 4]
"""


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(SPEC)
    return path


def assert_one_error_line(result, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("dlbs: error: ")
    assert len(lines) <= 2 and all(line.startswith("hint: ") for line in lines[1:])
    for fragment in fragments:
        assert fragment in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["plan", "validate", "print-config", "run", "help"])
def test_the_spec_is_a_positional_argument_or_c(command, tmp_path, capsys):
    """`dlbs run spec.yaml` as DLBS users and the docs write it; -c SPEC as DLBS's option."""
    path = tmp_path / "spec.yaml"
    path.write_text(f"parameters: {{exp.framework: dummy, exp.num_batches: 1, dummy.sleep: 0, "
                    f"exp.log_dir: '{tmp_path / 'logs'}', my.knob: 7}}\n")
    extra = {"run": ["--dry-run"], "validate": ["--plan-only"],
             "help": ["--params", "^my[.]"]}.get(command, [])
    outputs = []
    for given in ([str(path)], ["-c", str(path)]):
        assert main([command, *given, *extra]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and ("7" in outputs[0] or command == "validate")
    assert main([command, str(path), "-c", str(path), *extra]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"dlbs: error: two specs: '{path}' and -c '{path}'",
        "hint: give the spec once, as SPEC or as -c SPEC"]


def test_plan_json(dlbs_cli, spec):
    result = dlbs_cli("plan", "--config", str(spec))
    assert result.returncode == 0, result.stderr
    experiments = json.loads(result.stdout)
    assert [(e["exp.model"], e["exp.replica_batch"]) for e in experiments] == [
        ("resnet18", 2), ("resnet18", 4), ("alexnet_owt", 2), ("alexnet_owt", 4)]
    assert all(e["exp.num_batches"] == 5 and len(e["exp.id"]) == 12 for e in experiments)


def test_plan_jsonl_with_overrides(dlbs_cli, spec):
    result = dlbs_cli("plan", "--config", str(spec), "--format", "jsonl",
                      "-P", "exp.model=resnet50", "-V", "exp.replica_batch=[8]",
                      "-E", '{"condition": {"exp.replica_batch": 8}, '
                            '"parameters": {"exp.num_warmup_batches": 0}}')
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    # A variable beats a parameter of the same name, even one from -P.
    assert [(e["exp.model"], e["exp.replica_batch"]) for e in lines] == [
        ("resnet18", 8), ("alexnet_owt", 8)]
    assert all(e["exp.num_warmup_batches"] == 0 for e in lines)


def test_plan_table_and_csv_show_what_varies(dlbs_cli, spec):
    table = dlbs_cli("plan", "-c", str(spec), "--format", "table")
    assert table.returncode == 0
    header = table.stdout.splitlines()[0].split()
    assert header == ["#", "exp.id", "exp.model", "exp.replica_batch"]
    result = dlbs_cli("plan", "-c", str(spec), "--format", "csv",
                      "--keys", "exp.model,exp.effective_batch,pytorch.args")
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows[0] == ["exp.model", "exp.effective_batch", "pytorch.args"]
    assert rows[1][:2] == ["resnet18", "2"] and "--model resnet18" in rows[1][2]


def test_plan_output_file_is_written_atomically(dlbs_cli, spec, tmp_path):
    out = tmp_path / "plan.json"
    result = dlbs_cli("plan", "-c", str(spec), "-o", str(out))
    assert result.returncode == 0 and result.stdout == ""
    assert len(json.loads(out.read_text())) == 4
    before = out.read_text()
    bad = dlbs_cli("plan", "-c", str(spec), "-o", str(out), "-P", "exp.num_batches=${oops}")
    assert_one_error_line(bad, "parameter 'exp.num_batches'", "undefined name 'oops'")
    assert out.read_text() == before  # the old plan is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml", "plan.json"]


def test_no_defaults(dlbs_cli, tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"parameters": {"a": 1}, "variables": {"b": [1, 2]}}')
    for flag in ("--no-defaults", "--discard-default-config"):
        result = dlbs_cli("plan", "-c", str(path), flag, "--format", "jsonl")
        assert [json.loads(x) for x in result.stdout.splitlines()] == [
            {"a": 1, "b": 1}, {"a": 1, "b": 2}]


@pytest.mark.parametrize("text, fragments", [
    ("parameters: {a: [1,\n", ["malformed YAML"]),
    ("paramters: {}\n", ["unknown top-level key 'paramters'", "hint: did you mean 'parameters'?"]),
    ("parameters: {a: '${b}', b: '${a}'}\n", ["cycle: a -> b -> a"]),
    ("parameters: {exp.phase: train}\n", ["parameter 'exp.phase'", "not one of the choices"]),
    ("parameters: {exp.replica_batch: big}\n", ["parameter 'exp.replica_batch'",
                                                "cannot cast to int"]),
    ("parameters: {x: \"$(__import__('os'))$\"}\n", ["not allowed in an expression"]),
    ("variables: {exp.model: [a, b]}\nparameters: {x: '${exp.modle}'}\n",
     ["undefined name 'exp.modle'", "experiment: exp.model=a", "hint: did you mean 'exp.model'"]),
])
def test_bad_specs_give_one_error_line(dlbs_cli, tmp_path, text, fragments):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    result = dlbs_cli("plan", "-c", str(path))
    assert_one_error_line(result, str(path), *fragments)
    assert result.stdout == ""


def test_debug_shows_the_traceback(dlbs_cli, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("parameters: {a: '${b}'}\n")
    result = dlbs_cli("plan", "-c", str(path), "--no-defaults", "--debug")
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_usage_errors(dlbs_cli):
    assert_one_error_line(dlbs_cli("plan", "--format", "xml"), "invalid choice")
    assert_one_error_line(dlbs_cli("plan", "-c", "/no/such/spec.yaml"), "no such file")


def test_jsonl_stream_says_how_far_it_got(dlbs_cli, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("variables: {m: [ok, ok2, bad]}\n"
                    "parameters: {x: \"$(1 if '${m}' != 'bad' else 1 / 0)$\"}\n")
    result = dlbs_cli("plan", "-c", str(path), "--no-defaults", "--format", "jsonl")
    assert len(result.stdout.splitlines()) == 2
    assert_one_error_line(result, "experiment: m=bad", "after 2 experiments were written")


def test_validate(dlbs_cli, spec, tmp_path):
    ok = dlbs_cli("validate", "-c", str(spec))
    assert ok.returncode == 0 and "plan: 4 experiments" in ok.stdout
    collide = dlbs_cli("validate", "-c", str(spec), "-P", "exp.log_file=logs/same.log")
    assert_one_error_line(collide, "write the same log file 'logs/same.log'")
    assert collide.stdout.count("problem:") == 3
    empty = dlbs_cli("validate", "-c", str(spec), "-V", "exp.model=[]")
    assert_one_error_line(empty, "the plan is empty: variable 'exp.model' has no values")
    colon = dlbs_cli("validate", "-P", "exp.gpus=0:1")
    assert_one_error_line(colon, "several GPUs in one replica")
    env = dlbs_cli("validate", "-P", "exp.log_dir=${HOME}/logs",
                   "-V", 'exp.dtype=["float16", "float16"]')
    assert env.returncode == 0
    assert env.stdout == "plan: 1 experiments\nok\n"
    warnings = env.stderr.splitlines()
    assert all(line.startswith("dlbs: warning: ") for line in warnings)
    assert any("takes a value from the environment (HOME)" in line for line in warnings)
    assert any("1 identical experiments were merged" in line for line in warnings)


def test_print_config(dlbs_cli, spec):
    result = dlbs_cli("print-config", "-c", str(spec), "-P", "exp.dtype=float16")
    document = json.loads(result.stdout)
    assert document["variables"]["exp.model"] == ["resnet18", "alexnet_owt"]
    assert document["parameters"]["exp.dtype"]["val"] == "float16"
    assert document["parameters"]["exp.dtype"]["choices"]
    yaml = dlbs_cli("print-config", "--no-defaults", "-P", "a=1", "--format", "yaml")
    assert "parameters:\n  a: 1\n" in yaml.stdout


def test_help(dlbs_cli):
    result = dlbs_cli("help", "--params", "^exp\\.gpus$")
    assert result.returncode == 0 and result.stdout.startswith("exp.gpus  (str, default '')")
    assert "replica" in result.stdout
    by_text = dlbs_cli("help", "--text", "strong scaling")
    assert "exp.replica_batch" in by_text.stdout
    assert_one_error_line(dlbs_cli("help", "--params", "nothing-like-this"), "no parameter")
    assert_one_error_line(dlbs_cli("help", "--params", "("), "not a valid regular expression")


def test_list_frameworks(dlbs_cli):
    result = dlbs_cli("list", "frameworks")
    assert result.returncode == 0
    assert [line.split()[0] for line in result.stdout.splitlines()] == [
        "pytorch", "mxnet", "onnxruntime", "dummy"]


@pytest.mark.pytorch
@pytest.mark.mxnet
def test_list_models_asks_the_backends(dlbs_cli):
    result = dlbs_cli("list", "models")
    assert result.returncode == 0, result.stderr
    pairs = {tuple(line.split()) for line in result.stdout.splitlines()}
    for model in ("resnet50", "vgg16", "googlenet", "inception3", "deep_mnist"):
        assert ("pytorch", model) in pairs and ("mxnet", model) in pairs
    assert ("mxnet", "deep_speech2") in pairs and ("pytorch", "deep_speech2") not in pairs
    # ONNX Runtime runs the PyTorch backend's models, exported: all but the transformers.
    transformers = {"bert_base", "bert_large", "bert_debug", "gpt2", "gpt2_medium", "gpt2_xl",
                    "gpt2_debug", "llama3_1b", "llama3_3b", "llama3_8b", "llama3_70b",
                    "llama3_debug"}
    assert {("pytorch", model) for model in transformers} <= pairs
    assert {m for f, m in pairs if f == "onnxruntime"} == \
        {m for f, m in pairs if f == "pytorch"} - transformers
    only = dlbs_cli("list", "models", "--framework", "mxnet")
    assert {line.split()[0] for line in only.stdout.splitlines()} == {"mxnet"}
    assert_one_error_line(dlbs_cli("list", "models", "--framework", "caffe"),
                          "unknown framework 'caffe'")


def test_list_targets(dlbs_cli):
    result = dlbs_cli("list", "targets")
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == [
        "docker", "local", "slurm"]


def test_in_process_entry_point(spec, capsys):
    assert main(["plan", "-c", str(spec), "--format", "jsonl", "--keys", "exp.model"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == '{"exp.model":"resnet18"}'
    assert main(["plan", "-c", str(spec), "-P", "exp.dtype=half"]) == 2
    assert "not one of the choices" in capsys.readouterr().err
