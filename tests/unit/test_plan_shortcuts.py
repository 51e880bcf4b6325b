"""The planner's shortcuts change nothing in the plan.

Values shared between experiments are kept (the memo), list items no sweep changes are
resolved once, conditions are answered once per distinct input, an experiment takes the
values whose inputs did not change from the one before, expressions are parsed once per
template and answered from the values they read (dlbs/config/compiled.py). Each sweep
here is planned twice: as it is, and with every shortcut off (nothing kept, each item
resolved, each expression's whole text evaluated); the two plans must be the same, line for
line.
"""

from __future__ import annotations

import json

import orjson
import pytest

from dlbs.config.compiled import text_of
from dlbs.config.evaluator import SafeEvaluator
from dlbs.config.loader import load_spec
from dlbs.plan.builder import Planner
from dlbs.plan.resolver import ResolutionContext

ENV = {"DLBS_ROOT": "/opt/dlbs", "HOME": "/root"}
MODELS = ["resnet18", "resnet50", "vgg16", "alexnet_owt", "inception3"]
SWEEPS = {
    "pytorch in containers": (
        ["exp.docker=true"],
        [f"exp.model={json.dumps(MODELS)}", "exp.replica_batch=[1, 16, 256]",
         'exp.gpus=["", "0", "0,1", "0,1,2,3"]', 'exp.dtype=["float32", "float16"]',
         'exp.phase=["training", "inference"]', "exp.num_warmup_batches=[0, 3]"]),
    "traced": (
        ["exp.trace_level=step"],
        ['exp.model=["resnet18", "vgg16"]', 'exp.gpus=["", "0"]', "exp.num_batches=[5, 9]"]),
    "mxnet": (
        ["exp.framework=mxnet"],
        ['exp.model=["resnet50", "alexnet_owt"]', 'exp.gpus=["", "0", "0,1"]',
         'exp.dtype=["float32", "float16"]', 'mxnet.kv_store=["device", "dist_sync"]']),
    "evaluation scenarios": (
        ["exp.phase=inference"],
        ['exp.scenario=["offline", "single_stream", "benchmark"]',
         'exp.model=["resnet18", "resnet50"]', "exp.replica_batch=[1, 8]"]),
    "extensions with groups and cases": (
        [], ['exp.model=["resnet18", "resnet50", "vgg16"]', "exp.replica_batch=[1, 2]"],
        ['{"condition": {"exp.model": "resnet([0-9]+)"}, "parameters": {"exp.num_batches":'
         ' "$(${__condition.exp.model_1} // 9)$"}, "cases": [{"exp.dtype": "float32"},'
         ' {"exp.dtype": "float16"}]}']),
}


def plan_lines(params: list[str], variables: list[str],
               extensions: list[str] = ()) -> list[bytes]:
    spec = load_spec(None, params=params, variables=variables, extensions=extensions)
    return [orjson.dumps(experiment) for experiment in Planner(spec, ENV).experiments()]


def without_shortcuts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ResolutionContext, "shared", lambda self, deps: False)
    monkeypatch.setattr(Planner, "_condition_inputs", lambda self, index, ext: None)
    monkeypatch.setattr(Planner, "_changed", staticmethod(lambda layout, overrides: None))
    monkeypatch.setattr(ResolutionContext, "list_segments",
                        lambda self, raw: [(None, (item,), None) for item in raw])
    monkeypatch.setattr(SafeEvaluator, "evaluate_parts",
                        lambda self, literals, holes: self.evaluate(text_of(literals, holes)))


@pytest.mark.parametrize("name", SWEEPS)
def test_the_plan_is_the_same_without_shortcuts(name, monkeypatch):
    fast = plan_lines(*SWEEPS[name])
    assert len(fast) > 1
    without_shortcuts(monkeypatch)
    assert plan_lines(*SWEEPS[name]) == fast
