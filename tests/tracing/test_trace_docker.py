"""A traced experiment in a container on the real Docker Engine (started by .ci/run)."""

from __future__ import annotations

import pytest

from dlbs.results.protocol import parse_log
from tests.run.test_run_docker import container_spec
from tests.tracing.trace_checks import check_layer_nesting, load

pytestmark = pytest.mark.docker


def test_a_container_writes_its_trace_at_the_hosts_path(run_dlbs, tmp_path, test_image):
    """The log folder is relative (`logs`): the trace still lands beside the host's log."""
    result = run_dlbs("run", *container_spec(test_image), "-P", "exp.framework=dummy",
                      "-P", "dummy.sleep=0.002", "-P", "exp.num_batches=2",
                      "-P", "exp.trace_level=layer", "-P", "exp.trace_batches=2")
    assert result.returncode == 0, result.stderr
    (log,) = (tmp_path / "logs").glob("*.log")
    trace = log.with_name(log.name.replace(".log", ".trace.json.gz"))
    values = parse_log(log).values
    assert values["results.trace_file"] == str(trace)
    check_layer_nesting(load(trace))
    shown = run_dlbs("trace", "logs/results.db", "--view", "layers")
    assert shown.returncode == 0 and "layer1" in shown.stdout
