"""The node monitor that SLURM jobs run: stand-alone, by tag, and what the run loop makes of it."""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlbs.monitor.bundle import (
    PACKAGE,
    STANDALONE,
    VENDORED,
    node_monitor_bytes,
    write_node_monitor,
)
from dlbs.results.protocol import parse_log
from dlbs.run.job_results import job_environment, job_usage, split_node_values

MONITOR = Path(__file__).resolve().parents[2] / "dlbs" / "monitor"
STDLIB = set(sys.stdlib_module_names)
#: What a stand-alone module may import: the standard library and the modules packed with it.
ALLOWED = STDLIB | set(VENDORED)

# Spins for 1.5 s, then prints the CPU seconds it used; the tag marks it for the monitor.
BUSY = """
import os, time
start = time.monotonic()
while time.monotonic() - start < 1.5:
    pass
times = os.times()
print(times.user + times.system, flush=True)
time.sleep(0.5)
"""


@pytest.mark.parametrize("name", STANDALONE)
def test_standalone_modules_need_only_the_standard_library(name):
    tree = ast.parse((MONITOR / f"{name}.py").read_text())
    assert any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
               for node in tree.body), "annotations must stay unevaluated on Python 3.8"
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: a sibling, which must be stand-alone too
                siblings = [node.module] if node.module else [a.name for a in node.names]
                assert set(siblings) <= set(STANDALONE), siblings
            else:
                assert node.module.split(".")[0] in STDLIB, node.module
        elif isinstance(node, ast.Import):
            assert all(alias.name.split(".")[0] in ALLOWED for alias in node.names)
    # `isinstance(x, int | float)` needs 3.10 (annotations are only text there).
    unions = [node.lineno for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2
              and any(isinstance(part, ast.BinOp) and isinstance(part.op, ast.BitOr)
                      for part in ast.walk(node.args[1]))]
    assert unions == []


def test_standalone_modules_run_on_python_3_8():
    vermin = shutil.which("vermin", path=os.path.dirname(sys.executable))
    assert vermin, "vermin is a test dependency (pip install -e '.[test]')"
    result = subprocess.run([vermin, "-t=3.8-", "--no-tips", "--violations",
                             *[str(MONITOR / f"{name}.py") for name in STANDALONE]],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_zipapp_is_the_same_bytes_every_time(tmp_path):
    assert node_monitor_bytes() == node_monitor_bytes()
    path = write_node_monitor(str(tmp_path))
    before = os.stat(path).st_mtime_ns
    time.sleep(0.01)
    assert write_node_monitor(str(tmp_path)) == path and os.stat(path).st_mtime_ns == before


def _system_python() -> str:
    """A Python without dlbs: the system's (the venv's own has dlbs installed)."""
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if candidate and os.path.exists(candidate) and \
                not candidate.startswith(os.path.dirname(sys.executable)):
            return candidate
    pytest.fail("no python3 outside the venv to run the node monitor with")


def test_the_node_monitor_samples_tagged_processes_only(tmp_path):
    zipapp = write_node_monitor(str(tmp_path))
    python = _system_python()
    # Isolated (-I) and without site-packages (-S): nothing but the standard library.
    assert subprocess.run([python, "-I", "-S", "-c", "import dlbs"],
                          capture_output=True).returncode != 0
    out = tmp_path / "exp.log.n1.dlbs-node"
    monitor = subprocess.Popen([python, "-I", "-S", zipapp, "--out", str(out), "--node", "n1",
                                "--tag", "job7.n1", "--frequency", "0.1"])
    deadline = time.monotonic() + 30
    while not out.exists():  # ready: its signal handlers are in place
        assert time.monotonic() < deadline and monitor.poll() is None
        time.sleep(0.02)
    tagged = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "DLBS_MONITOR_TAG": "job7.n1"})
    other = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "DLBS_MONITOR_TAG": "job7.n2"})
    used = float(tagged.stdout.readline())
    other.stdout.readline()
    tagged.wait()
    other.wait()
    tagged.stdout.close()
    other.stdout.close()
    monitor.send_signal(signal.SIGTERM)
    assert monitor.wait(timeout=30) == 0
    values = parse_log(out).values
    environment = values["job.environment.n1"]
    assert environment["node"] == "n1" and environment["cpu_count"] >= 1
    data = values["job.monitor.n1"]
    series = data["series"]
    assert data["frequency"] == 0.1 and data["warnings"] == []
    intervals = [b - a for a, b in zip([0.0, *series["time"]], series["time"])]
    sampled = sum(c * dt for c, dt in zip(series["cpu"], intervals)) / 100
    # The tagged process's CPU time, not the other's too (that would double it).
    assert 0.7 * used <= sampled <= 1.3 * used, (sampled, used)


NODE_MAIN = "import sys; from dlbs.monitor.node import main; sys.exit(main(sys.argv[1:]))"
FAKE_NVML = Path(__file__).resolve().parent / "data" / "fake_nvml"
REPO = Path(__file__).resolve().parents[2]


def _mark(log: Path, key: str) -> None:
    import datetime

    now = datetime.datetime.now(datetime.UTC).isoformat()
    with open(log, "a") as out:
        out.write(f'__results.{key}__="{now}"\n')


def test_the_node_monitor_reads_the_energy_at_the_marks_only(tmp_path):
    # What a SLURM job's node runs by default (monitor.energy, frequency 0), with the tests'
    # NVML: no sample of its own, a reading of the counters at each of the backend's marks.
    out, log = tmp_path / "exp.log.n1.dlbs-node", tmp_path / "exp.log"
    log.write_text("header\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKE_NVML), str(REPO)]),
           "FAKE_NVML_GPUS": "0:400"}
    monitor = subprocess.Popen([sys.executable, "-c", NODE_MAIN, "--out", str(out),
                                "--node", "n1", "--tag", "job7.n1", "--frequency", "0",
                                "--energy", "1", "--gpus", "0", "--log", str(log)], env=env)
    deadline = time.monotonic() + 30
    while not out.exists():
        assert time.monotonic() < deadline and monitor.poll() is None
        time.sleep(0.02)
    time.sleep(0.5)  # the monitor follows the log from its size now
    _mark(log, "timed_start")
    time.sleep(0.6)
    _mark(log, "timed_end")
    time.sleep(0.3)
    monitor.send_signal(signal.SIGTERM)
    assert monitor.wait(timeout=30) == 0
    data = parse_log(out).values["job.monitor.n1"]
    series = data["series"]
    assert data["frequency"] == 0.0 and data["warnings"] == []
    assert set(series) == {"time", "gpu_energy"} and len(series["time"]) == 2
    span = series["time"][1] - series["time"][0]
    assert span == pytest.approx(0.6, abs=0.1)
    assert series["gpu_energy"][1] == pytest.approx(400.0 * span, rel=0.05)


def test_the_node_monitor_without_energy_or_sampling_ends_by_itself(tmp_path):
    out = tmp_path / "exp.log.n1.dlbs-node"
    done = subprocess.run([sys.executable, "-c", NODE_MAIN, "--out", str(out), "--node", "n1",
                           "--tag", "t", "--frequency", "0", "--energy", "0",
                           "--log", str(tmp_path / "exp.log")],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert done.returncode == 0
    values = parse_log(out).values
    assert "job.environment.n1" in values and "job.monitor.n1" not in values


def test_one_node_gives_plain_series_on_the_attempts_clock():
    printed = {"results.time": 1.0, "job.environment.node1": {"host": "a", "python": "3.8"},
               "job.monitor.node1": {"start": 1000.5, "frequency": 0.5, "warnings": ["w"],
                                     "series": {"time": [0.5, 1.0], "cpu": [90.0, 95.0],
                                                "rss": [10.0, 11.0]}}}
    rest, environments, monitors = split_node_values(printed)
    assert rest == {"results.time": 1.0}
    usage = job_usage(monitors, attempt_start=1000.0)
    assert usage == {"results.use.time": [1.0, 1.5], "results.use.cpu": [90.0, 95.0],
                     "results.use.rss": [10.0, 11.0], "results.use.warnings": ["w"]}
    assert job_environment(environments, {"dlbs_version": "0.1.0"}) == {
        "host": "a", "python": "3.8", "dlbs_version": "0.1.0"}


def test_several_nodes_give_each_nodes_series_and_a_summary():
    monitors = {
        "node1": {"start": 100.0, "frequency": 1.0, "warnings": [],
                  "series": {"time": [1.0, 2.0, 3.0], "cpu": [100.0, 100.0, 100.0],
                             "rss": [1.0, 1.0, 1.0], "gpu_util": [50.0, 60.0, 70.0]}},
        "node2": {"start": 100.2, "frequency": 1.0, "warnings": ["no GPU series"],
                  "series": {"time": [1.0, 2.0], "cpu": [50.0, 150.0], "rss": [2.0, 2.0],
                             "gpu_util": [30.0, float("nan")]}},
    }
    usage = job_usage(monitors, attempt_start=100.0)
    assert usage["results.use.time"] == [1.0, 2.0, 3.0]
    assert usage["results.use.cpu"] == [150.0, 250.0, None]  # node2 has no third sample
    assert usage["results.use.rss"] == [3.0, 3.0, None]
    assert usage["results.use.gpu_util"] == [40.0, 60.0, 70.0]  # the mean of what there is
    assert usage["results.use.nodes"]["node2"]["time"] == [1.2, 2.2]
    assert usage["results.use.warnings"] == ["node2: no GPU series"]
    environment = job_environment({"node2": {"host": "b"}, "node1": {"host": "a"}}, {})
    assert environment["host"] == "a,b" and environment["node_count"] == 2
    assert environment["nodes"]["node2"] == {"host": "b"}
    assert json.dumps(usage)


def test_the_zipapp_holds_the_standalone_package(tmp_path):
    import zipfile

    with zipfile.ZipFile(write_node_monitor(str(tmp_path))) as archive:
        names = set(archive.namelist())
    # NVIDIA's binding goes with it (nvidia-ml-py is a dependency of dlbs).
    assert names == {"__main__.py", f"{PACKAGE}/__init__.py", "pynvml.py",
                     *(f"{PACKAGE}/{name}.py" for name in STANDALONE)}
