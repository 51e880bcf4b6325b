"""exp.num_classes: passed to the backends only when set, and in exp.id only when set.

`identity: when_set` (docs/language.md sections 2 and 9) is what lets a parameter with a null
default join the configs without changing the id of any experiment that leaves it null.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlbs.config.loader import load_spec
from dlbs.errors import ConfigError
from dlbs.plan.builder import Planner
from dlbs.recipes.invocation import tokens

ENV = {"DLBS_ROOT": "/opt/dlbs", "HOME": "/root"}
FRAMEWORKS = {"pytorch": [], "mxnet": [], "dummy": [],
              "onnxruntime": ["exp.phase=inference"]}


def plan(config=None, **kwargs) -> list[dict]:
    return list(Planner(load_spec(config, **kwargs), ENV).experiments())


def spec_file(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(document))
    return path


def test_a_null_when_set_parameter_is_left_out_of_the_id(tmp_path):
    before = {"exp.id": None, "a": 1}
    (old,) = plan(spec_file(tmp_path, {"parameters": before}), defaults=False)
    added = {**before, "b": {"val": None, "identity": "when_set"}}
    (unset,) = plan(spec_file(tmp_path, {"parameters": added}), defaults=False)
    assert unset["b"] is None and unset["exp.id"] == old["exp.id"]
    (three,) = plan(spec_file(tmp_path, {"parameters": added}), defaults=False,
                    params=["b=3"])
    assert three["exp.id"] != old["exp.id"]
    # Declared plainly, the same null parameter would have changed the id.
    plain = {**before, "b": {"val": None}}
    (counted,) = plan(spec_file(tmp_path, {"parameters": plain}), defaults=False)
    assert counted["exp.id"] != old["exp.id"]


def test_a_redefinition_keeps_when_set_unless_it_says_otherwise(tmp_path):
    path = spec_file(tmp_path, {"parameters": {"exp.num_classes": {"val": None,
                                                                   "desc": "mine"}}})
    assert load_spec(path).params["exp.num_classes"].when_set
    path = spec_file(tmp_path, {"parameters": {"exp.num_classes": {"val": None,
                                                                   "identity": True}}})
    assert not load_spec(path).params["exp.num_classes"].when_set


def test_identity_takes_true_false_or_when_set(tmp_path):
    path = spec_file(tmp_path, {"parameters": {"b": {"val": 1, "identity": "sometimes"}}})
    with pytest.raises(ConfigError, match="identity must be true, false or when_set"):
        load_spec(path, defaults=False)


def test_the_declaration_shows_when_set():
    definition = load_spec().params["exp.num_classes"].definition()
    assert definition["identity"] == "when_set" and definition["val"] is None


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_num_classes_reaches_the_backend_only_when_set(framework):
    base = [f"exp.framework={framework}", *FRAMEWORKS[framework]]
    (unset,) = plan(params=base)
    assert unset["exp.num_classes"] is None
    assert "--num_classes" not in tokens(unset[f"{framework}.args"], "args")
    (ten,) = plan(params=[*base, "exp.num_classes=10"])
    argv = tokens(ten[f"{framework}.args"], "args")
    assert argv[argv.index("--num_classes") + 1] == "10"
    assert ten["exp.id"] != unset["exp.id"]
    # The identity set stored with each experiment says the same.
    assert "exp.num_classes" not in sum(unset["exp.id_params"].values(), [])
    assert "exp.num_classes" in sum(ten["exp.id_params"].values(), [])


def test_a_class_count_below_one_is_refused():
    with pytest.raises(ConfigError, match="exp.num_classes.*below the minimum 1"):
        plan(params=["exp.num_classes=0"])
