"""`dlbs run` with an NVML that never returns (issue 34, defect 3).

The tests' stand-in pynvml (tests/monitor/data/fake_nvml, first on PYTHONPATH) hangs in a
named call, as a driver in trouble does. Whatever call hangs, `dlbs run` ends when its
benchmark ends, on SIGTERM and on SIGINT, records the attempt, and says what the monitor
could not measure; before, it went on after the benchmark and only kill -9 ended it.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.run.conftest import attempts, wait_until

REPO = Path(__file__).resolve().parents[2]
FAKE_NVML = REPO / "tests" / "monitor" / "data" / "fake_nvml"
DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_warmup_batches=0", "-P", "exp.gpus=0"]
ENERGY_READ = "nvmlDeviceGetTotalEnergyConsumption"


def _environment(tmp_path: Path, hung: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKE_NVML), str(REPO)]),
            "FAKE_NVML_HANG": hung, "FAKE_NVML_CALLS": str(tmp_path / "nvml-calls")}


def _dlbs(tmp_path: Path, hung: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "run", *DUMMY, *args],
                            cwd=tmp_path, env=_environment(tmp_path, hung), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def _finish(sweep: subprocess.Popen[str], limit: float) -> str:
    """What `sweep` printed on stderr; it must end within `limit` seconds (else killed)."""
    try:
        _, err = sweep.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(sweep.pid, signal.SIGKILL)
        sweep.communicate()
        raise AssertionError(f"dlbs run did not end within {limit:g} s") from None
    return err


def _warnings(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return " ".join(row[0] or "" for row in conn.execute("SELECT results FROM attempts"))


def _hung(tmp_path: Path, call: str) -> bool:
    calls = tmp_path / "nvml-calls"
    return calls.exists() and f"hang {call}" in calls.read_text()


@pytest.mark.parametrize(("hung", "sampling"), [
    (ENERGY_READ, ()), ("nvmlInit", ()),
    # Utilization is read by the sampled series only (the marks read the counters alone).
    ("nvmlDeviceGetUtilizationRates", ("-P", "monitor.frequency=0.1")),
    (ENERGY_READ, ("-P", "monitor.frequency=0.1")), ("nvmlShutdown", ()),
])
def test_dlbs_run_ends_with_its_benchmark(tmp_path, hung, sampling):
    began = time.monotonic()
    sweep = _dlbs(tmp_path, hung, "-P", "exp.num_batches=10", "-P", "dummy.sleep=0.05",
                  *sampling)
    err = _finish(sweep, 120)
    assert sweep.returncode == 0, err
    assert "Traceback" not in err
    assert _hung(tmp_path, hung)
    ((_, _, status, _),) = attempts(tmp_path / "logs" / "results.db")
    assert status == "ok"
    # A query blocked 5 s at most (the monitor's query timeout; 0.5 s the read at a mark
    # the monitor sees as it stops), then the run went on, and its results say so.
    assert time.monotonic() - began < 60
    if hung in (ENERGY_READ, "nvmlInit"):
        assert f"{'nvmlInit' if hung == 'nvmlInit' else 'a reading'} gave no answer within" \
            in _warnings(tmp_path / "logs" / "results.db")


@pytest.mark.parametrize(("number", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.parametrize("sampling", [(), ("-P", "monitor.frequency=0.1")])
def test_a_stop_signal_ends_dlbs_run_while_nvml_hangs(tmp_path, number, status, sampling):
    sweep = _dlbs(tmp_path, ENERGY_READ, "-P", "exp.num_batches=3600", "-P", "dummy.sleep=1",
                  *sampling)
    try:
        # The backend marked its timed interval's start: the monitor's read of the counters
        # there is what hangs.
        wait_until(lambda: _hung(tmp_path, ENERGY_READ), "NVML was never asked", limit=120)
        os.kill(sweep.pid, number)
        err = _finish(sweep, 60)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == status, err
    assert "Traceback" not in err
    ((_, _, state, message),) = attempts(tmp_path / "logs" / "results.db")
    name = signal.Signals(number).name
    assert state == "interrupted" and message.startswith(f"interrupted: dlbs run got {name}")
