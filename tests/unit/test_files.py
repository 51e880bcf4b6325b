"""docs/language.md section 1 (files, layers, includes, YAML 1.2) and section 2 (definitions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlbs.config.loader import load_spec
from dlbs.errors import ConfigError
from dlbs.plan.builder import Planner


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def plan(path: Path, **kwargs) -> list[dict]:
    return list(Planner(load_spec(path, defaults=False, **kwargs), {}).experiments())


def test_json_and_yaml_give_the_same_object(tmp_path: Path):
    document = {"parameters": {"a": 1, "b": "${a}", "c": [True, None]},
                "variables": {"v": [1, 2]},
                "extensions": [{"condition": {"v": 2}, "parameters": {"d": "x"}}]}
    as_json = write(tmp_path / "s.json", json.dumps(document))
    as_yaml = write(tmp_path / "s.yaml", """
parameters: {a: 1, b: "${a}", c: [true, null]}
variables:
  v: [1, 2]
extensions:
  - condition: {v: 2}
    parameters: {d: x}
""")
    assert plan(as_json) == plan(as_yaml)


def test_yaml_is_read_as_yaml_1_2(tmp_path: Path):
    spec = write(tmp_path / "s.yml", "parameters: {a: no, b: 1e-3, c: on, d: yes, e: 0o17}\n")
    (experiment,) = plan(spec)
    assert experiment == {"a": "no", "b": 0.001, "c": "on", "d": "yes", "e": 15}


@pytest.mark.parametrize("name, text, message", [
    ("bad.json", '{"parameters": {"a": 1,}}', "bad.json:1:24: malformed JSON"),
    ("bad.yaml", "parameters:\n  a: [1,\n  b: 2\n",
     "bad.yaml:4:1: malformed YAML: expected ',' or ']', but got '<stream end>' (while parsing "
     "a flow sequence started at line 2)"),
    ("bad.yaml", "a: 1\n b: 2\n", "bad.yaml:2:3: malformed YAML: mapping values are not "
                                   "allowed here"),
    ("bad.yaml", "parameters: {a: 1}\nvariable: {}\n", "unknown top-level key 'variable'"),
    ("bad.json", "[1, 2]", "a spec is an object with 'parameters'"),
    ("bad.toml", "a = 1", "unsupported file type '.toml'"),
])
def test_malformed_files(tmp_path: Path, name: str, text: str, message: str):
    with pytest.raises(ConfigError) as caught:
        plan(write(tmp_path / name, text))
    assert message in str(caught.value)


def test_unknown_top_level_key_suggests(tmp_path: Path):
    with pytest.raises(ConfigError) as caught:
        plan(write(tmp_path / "s.yaml", "paramters: {}\n"))
    assert caught.value.hint == "did you mean 'parameters'?"


def test_missing_file(tmp_path: Path):
    with pytest.raises(ConfigError, match="no such file"):
        plan(tmp_path / "none.yaml")


def test_includes_are_relative_and_merged_before(tmp_path: Path):
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "base.yaml",
          "parameters: {a: base, b: base}\nvariables: {v: [1]}\n"
          "extensions: [{condition: {a: main}, parameters: {e1: 1}}]\n")
    spec = write(tmp_path / "main.yaml",
                 "include: [sub/base.yaml]\nparameters: {a: main}\n"
                 "extensions: [{condition: {a: main}, parameters: {e2: 2}}]\n")
    (experiment,) = plan(spec)
    assert experiment == {"a": "main", "b": "base", "v": 1, "e1": 1, "e2": 2}


def test_include_cycle(tmp_path: Path):
    write(tmp_path / "a.yaml", "include: [b.yaml]\n")
    write(tmp_path / "b.yaml", "include: [a.yaml]\n")
    with pytest.raises(ConfigError) as caught:
        plan(tmp_path / "a.yaml")
    assert "include cycle:" in str(caught.value)
    assert str(caught.value).count("a.yaml") == 2


def test_later_layer_keeps_declaration_and_casts(tmp_path: Path):
    write(tmp_path / "base.yaml",
          "parameters:\n  monitor.frequency: {val: 0, type: float, desc: seconds}\n"
          "  n: {val: 1, type: int}\n")
    spec = write(tmp_path / "s.yaml",
                 "include: [base.yaml]\nparameters: {monitor.frequency: 0.1}\n")
    (experiment,) = plan(spec)
    assert experiment["monitor.frequency"] == 0.1
    spec = write(tmp_path / "s2.yaml", "include: [base.yaml]\nparameters: {n: '12'}\n")
    assert plan(spec)[0]["n"] == 12
    spec = write(tmp_path / "s3.yaml", "include: [base.yaml]\nparameters: {n: twelve}\n")
    with pytest.raises(ConfigError, match="s3.yaml: parameter 'n': cannot cast to int"):
        plan(spec)


def test_redefinition_keeps_fields_it_does_not_give(tmp_path: Path):
    write(tmp_path / "base.yaml", "parameters:\n  m: {val: a, type: str, choices: [a, b]}\n")
    spec = write(tmp_path / "s.yaml",
                 "include: [base.yaml]\nparameters:\n  m: {val: c, desc: new}\n")
    with pytest.raises(ConfigError, match="not one of the choices"):
        plan(spec)


def test_cli_layer_comes_last(tmp_path: Path):
    spec = write(tmp_path / "s.yaml", "parameters: {a: 1}\nvariables: {v: [1, 2]}\n")
    experiments = plan(spec, params=["a=2"], variables=["v=[3]"])
    assert experiments == [{"a": 2, "v": 3}]


@pytest.mark.parametrize("option, value, message", [
    ("params", ["novalue"], "-P 'novalue' is not NAME=VALUE"),
    ("extensions", ["{bad"], "-E #1 is not JSON"),
    ("extensions", ["[1]"], "an extension is an object"),
])
def test_bad_cli_overrides(tmp_path: Path, option: str, value: list[str], message: str):
    with pytest.raises(ConfigError, match=message):
        plan(write(tmp_path / "s.yaml", "{}\n"), **{option: value})
