"""Experiment ids stay what they were.

An id is the hash of an experiment's identifying values: results are stored, compared and
resumed by it, so a change to the planner, or to an identifying default, must not move it.
These ids were made by the planner before its speed-ups (issue 22); if one changes on
purpose, the change is one users see.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlbs.config.loader import load_spec
from dlbs.plan.builder import Planner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SWEEPS = {
    "quickstart": ({"config": EXAMPLES / "quickstart.yaml"},
                   ["1c5c7f214a9e", "6754878dbec1", "281cdaba1db2", "7e9b2f6252fe"]),
    "docker": ({"params": ["exp.docker=true"],
                "variables": ['exp.model=["resnet50", "vgg16"]', 'exp.gpus=["", "0,1"]',
                              'exp.dtype=["float32", "float16"]']},
               ["f8327fa18f5c", "e6c6e7f7713d", "674ca4658e60", "a5541e68d6ac",
                "4670fddd1a2a", "310a327f3a55", "b3854c4d02fd", "25a42f916036"]),
    "mxnet": ({"params": ["exp.framework=mxnet"],
               "variables": ['exp.model=["resnet50"]', 'exp.gpus=["", "0"]',
                             'mxnet.kv_store=["device", "dist_sync"]']},
              ["bafdbbc8d784", "0ca542a37c78", "26dcf790b3cb", "9f811b32daad"]),
    "traced": ({"params": ["exp.trace_level=step"],
                "variables": ['exp.model=["resnet18"]', "exp.num_batches=[5, 9]"]},
               ["c40b86b150d9", "a175def04113"]),
}


@pytest.mark.parametrize("name", SWEEPS)
def test_ids_are_those_of_the_planner_before(name):
    spec_args, ids = SWEEPS[name]
    spec = load_spec(spec_args.get("config"), params=spec_args.get("params", ()),
                     variables=spec_args.get("variables", ()))
    planned = Planner(spec, {"DLBS_ROOT": "/opt/dlbs", "HOME": "/root"}).experiments()
    assert [experiment["exp.id"] for experiment in planned] == ids
