"""A scenario as a SLURM job on the real two-node cluster: the same keys, LoadGen's logs beside."""

from __future__ import annotations

from pathlib import Path

import pytest
from evaluation_helpers import logs_by_scenario, statuses

from tests.targets.conftest import slurm_cluster  # noqa: F401 - the fixture

pytestmark = pytest.mark.slurm


def test_a_scenario_runs_as_a_job(run_dlbs, tmp_path, slurm_cluster):  # noqa: F811
    result = run_dlbs("run", "-P", "exp.framework=dummy", "-P", "exp.scheduler=slurm",
                      "-P", "dummy.sleep=0.01", "-P", "exp.replica_batch=2",
                      "-P", "exp.scenario=single_stream", "-P", "exp.min_duration_s=0.3",
                      "-P", "exp.min_query_count=10")
    assert result.returncode == 0, result.stderr
    assert [status for _, status in statuses(tmp_path / "logs" / "results.db")] == ["ok"]
    values = logs_by_scenario(tmp_path / "logs")["single_stream"]
    assert values["results.latency_p50"] >= 10
    assert Path(values["results.loadgen_log_dir"], "mlperf_log_detail.txt").is_file()
