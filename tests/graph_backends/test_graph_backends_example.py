"""examples/graph_backends.yaml: one `dlbs run`, then `dlbs report` with a row per configuration.

The example times ResNet-50 (bench/graph_backends/run.sh runs it whole, ~30 minutes); the
test runs the same spec on a small model that all three frameworks have, with a few batches.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.run.conftest import attempts

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "graph_backends.yaml")
CONFIGURATIONS = 15  # PyTorch 6, MXNet 4, ONNX Runtime 5


def test_the_example_plans_one_experiment_per_configuration_and_batch(dlbs_cli):
    result = dlbs_cli("plan", "--config", EXAMPLE, "--format", "json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert len(plan) == 2 * CONFIGURATIONS
    assert {e["exp.replica_batch"] for e in plan} == {1, 32}
    assert all(e["exp.num_batches"] >= 50 for e in plan if e["exp.replica_batch"] == 1)
    # The same threads for every framework.
    threads = {e.get("pytorch.num_threads", e.get("mxnet.num_threads",
                                                  e.get("onnxruntime.intra_op_threads")))
               for e in plan}
    assert threads == {1}
    assert len({e["exp.id"] for e in plan}) == len(plan)


@pytest.mark.pytorch
@pytest.mark.mxnet
@pytest.mark.onnxruntime
@pytest.mark.slow
def test_the_example_runs_and_reports_one_row_per_configuration(run_dlbs, tmp_path):
    small = ["-P", "exp.model=sensor_net", "-V", "exp.replica_batch=[2]",
             "-P", "exp.num_batches=3", "-P", "exp.num_warmup_batches=2"]
    result = run_dlbs("run", "--config", EXAMPLE, *small, timeout=1500)
    assert result.returncode == 0, result.stderr
    db = tmp_path / "logs" / "graph_backends" / "results.db"
    assert [row[2] for row in attempts(db)] == ["ok"] * CONFIGURATIONS
    report = run_dlbs("report", "logs/graph_backends", "--format", "json")
    assert report.returncode == 0, report.stderr
    rows = json.loads(report.stdout)["rows"]
    assert len(rows) == CONFIGURATIONS
    frameworks = [row.get("framework") or row.get("exp.framework") for row in rows]
    assert sorted(frameworks) == sorted(["pytorch"] * 6 + ["mxnet"] * 4 + ["onnxruntime"] * 5)
