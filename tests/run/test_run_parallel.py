"""`runtime.max_parallel`: local experiments at once on disjoint GPUs, never on the CPU."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from dlbs.results.protocol import parse_log
from tests.run.conftest import attempts

# The dummy backend touches no GPU: "GPU" experiments run anywhere, each on its own ids.
DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=2", "-P", "exp.num_warmup_batches=0"]


def _spans(folder: Path) -> dict[str, tuple[datetime, datetime]]:
    spans = {}
    for log in folder.glob("*.log"):
        values = parse_log(log).values
        spans[values["exp.gpus"]] = (datetime.fromisoformat(values["results.start_time"]),
                                     datetime.fromisoformat(values["results.end_time"]))
    return spans


def _overlap(a: tuple[datetime, datetime], b: tuple[datetime, datetime]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_experiments_on_disjoint_gpus_run_at_once(run_dlbs, tmp_path):
    result = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=1", "-P", "runtime.max_parallel=2",
                      "-V", 'exp.gpus=["0", "1", "0,1", "2"]')
    assert result.returncode == 0, result.stderr
    spans = _spans(tmp_path / "logs")
    assert _overlap(spans["0"], spans["1"])  # two GPUs, two experiments at once
    # "0,1" needs both: it waits for them ("2", on a GPU of its own, may run beside it).
    assert not _overlap(spans["0,1"], spans["0"]) and not _overlap(spans["0,1"], spans["1"])
    assert not _overlap(spans["2"], spans["0"]) or not _overlap(spans["2"], spans["1"])


def test_one_at_a_time_by_default(run_dlbs, tmp_path):
    result = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=0.3", "-V", 'exp.gpus=["0", "1"]')
    assert result.returncode == 0, result.stderr
    spans = _spans(tmp_path / "logs")
    assert not _overlap(spans["0"], spans["1"])


def test_cpu_experiments_are_refused_in_parallel(run_dlbs, tmp_path):
    result = run_dlbs("run", *DUMMY, "-P", "runtime.max_parallel=2",
                      "-V", "exp.replica_batch=[1, 2]")
    assert result.returncode == 2
    assert "runs on the CPU, but runtime.max_parallel is 2" in result.stderr
    assert not (tmp_path / "logs").exists()


def test_ctrl_c_stops_every_running_experiment(tmp_path):
    sweep = subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "run", *DUMMY,
                              "-P", "dummy.fail=hang", "-P", "runtime.max_parallel=2",
                              "-V", 'exp.gpus=["0", "1", "2"]'],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while sum("dummy backend" in log.read_text(errors="replace")
              for log in (tmp_path / "logs").glob("*.log")) < 2:
        assert time.monotonic() < deadline, "the backends did not start"
        time.sleep(0.05)
    os.killpg(sweep.pid, signal.SIGINT)
    _, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 130, err
    rows = attempts(tmp_path / "logs" / "results.db")
    assert [r[2] for r in rows] == ["interrupted", "interrupted"]  # the third never started
