"""Experiment ids stay what they were.

An id is the hash of an experiment's identifying values: results are stored, compared and
resumed by it, so a change to the planner, or to an identifying default, must not move it.
These ids were made by the planner without its speed-ups of issue 22 (main as merged
with them); if one changes on purpose, the change is one users see.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlbs.config.loader import load_spec
from dlbs.plan.builder import Planner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SWEEPS = {
    "quickstart": ({"config": EXAMPLES / "quickstart.yaml"},
                   ["d10675a05903", "2c6e9591351d", "4bd6cfa1b27c", "a9f3d7df89a2"]),
    "docker": ({"params": ["exp.docker=true"],
                "variables": ['exp.model=["resnet50", "vgg16"]', 'exp.gpus=["", "0,1"]',
                              'exp.dtype=["float32", "float16"]']},
               ["d2dfb2a67f70", "6c8508df0d3e", "abbe866486f5", "26770cdacfba",
                "16ad479846d1", "87f82b208c9e", "b23782e4db96", "2597eb8c3ca0"]),
    "mxnet": ({"params": ["exp.framework=mxnet"],
               "variables": ['exp.model=["resnet50"]', 'exp.gpus=["", "0"]',
                             'mxnet.kv_store=["device", "dist_sync"]']},
              ["7b4ef3518ef3", "9382c57679ef", "005f5328f21c", "7fb5d9af7f31"]),
    "traced": ({"params": ["exp.trace_level=step"],
                "variables": ['exp.model=["resnet18"]', "exp.num_batches=[5, 9]"]},
               ["090e38a1b85a", "67488211758d"]),
}


@pytest.mark.parametrize("name", SWEEPS)
def test_ids_are_those_of_the_planner_before(name):
    spec_args, ids = SWEEPS[name]
    spec = load_spec(spec_args.get("config"), params=spec_args.get("params", ()),
                     variables=spec_args.get("variables", ()))
    planned = Planner(spec, {"DLBS_ROOT": "/opt/dlbs", "HOME": "/root"}).experiments()
    assert [experiment["exp.id"] for experiment in planned] == ids
