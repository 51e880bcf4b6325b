"""ResourceMonitor on real processes: CPU and memory of a tree, promptness, early exits."""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import time

import pytest

from dlbs.monitor import ResourceMonitor
from dlbs.monitor.sampling import ENERGY_UNAVAILABLE

# The grandchild holds 100 MiB and spins for 1.5 s, then reports its busy window (monotonic
# clock, which is system-wide) and CPU seconds; the child holds 200 MiB and waits for it.
# Both report their CPU time and stay alive a little, so that the monitor's last samples
# see all of it.
GRANDCHILD = """
import os, time
hold = bytearray(100 * 2**20)
hold[::4096] = b"\\x01" * len(range(0, len(hold), 4096))
start, before = time.monotonic(), os.times()
while time.monotonic() - start < 1.5:
    pass
end, after = time.monotonic(), os.times()
busy = (after.user + after.system) - (before.user + before.system)
print("grandchild", start, end, busy, after.user + after.system, flush=True)
time.sleep(0.4)
"""
CHILD = f"""
import os, subprocess, sys, time
hold = bytearray(200 * 2**20)
hold[::4096] = b"\\x01" * len(range(0, len(hold), 4096))
subprocess.run([sys.executable, "-c", {GRANDCHILD!r}])
times = os.times()
print("child", times.user + times.system, flush=True)
time.sleep(0.4)
"""


def test_cpu_and_rss_of_a_busy_process_tree(spawn):
    child = spawn(CHILD)
    monitor = ResourceMonitor(0.1)
    monitor.start(child.pid)
    report = child.stdout.read().split("\n")
    child.wait()
    series = monitor.stop()

    _, busy_start, busy_end, busy_cpu, grandchild_cpu = report[0].split()
    child_cpu = float(report[1].split()[1])
    times, cpu, rss = series["time"], series["cpu"], series["rss"]
    assert len(times) == len(cpu) == len(rss) >= 15
    assert times == sorted(times) and all(value >= 0 for value in cpu)

    # The CPU series integrates to the CPU time the processes themselves report.
    intervals = [b - a for a, b in zip([0.0, *times], times)]
    sampled_cpu_seconds = sum(c * dt for c, dt in zip(cpu, intervals)) / 100
    reported = float(grandchild_cpu) + child_cpu
    assert sampled_cpu_seconds == pytest.approx(reported, rel=0.15, abs=0.1)

    # While the grandchild spins, a sample reads what it got of a core: near 100 on an idle
    # machine, its actual share on a busy one.
    start = float(busy_start) - monitor.started_at
    end = float(busy_end) - monitor.started_at
    inside = [c for t, c, dt in zip(times, cpu, intervals) if t - dt >= start and t <= end]
    assert len(inside) >= 8
    share = 100 * float(busy_cpu) / (float(busy_end) - float(busy_start))
    assert statistics.median(inside) == pytest.approx(share, abs=25)

    # Both processes' memory counts: 300 MiB held, plus two interpreters.
    assert 300 <= max(rss) <= 450


def test_samples_come_at_the_frequency(spawn):
    sleeper = spawn("import time; print('ready', flush=True); time.sleep(30)")
    assert sleeper.stdout.readline() == "ready\n"  # its start-up CPU time is behind it
    monitor = ResourceMonitor(0.05, rapl_root=None)
    monitor.start(sleeper.pid)
    time.sleep(1.0)
    series = monitor.stop()
    assert 12 <= len(series["time"]) <= 21
    # Scheduled on a fixed grid: no drift even though each sample takes time.
    assert series["time"][-1] == pytest.approx(0.05 * len(series["time"]), abs=0.2)
    assert all(value < 30 for value in series["cpu"])  # a sleeping process
    assert set(series) == {"time", "cpu", "rss"}


@pytest.mark.parametrize("frequency", [0.1, 2.0, 10.0])
def test_stop_returns_promptly(spawn, frequency):
    sleeper = spawn("import time; time.sleep(30)")
    monitor = ResourceMonitor(frequency)
    monitor.start(sleeper.pid)
    time.sleep(0.25)
    began = time.monotonic()
    monitor.stop()
    assert time.monotonic() - began < 0.5


def test_a_process_that_is_already_gone():
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()  # exited and reaped: its pid names no process now
    monitor = ResourceMonitor(0.05, rapl_root=None)
    monitor.start(done.pid)
    series = monitor.stop()
    assert series == {"time": [], "cpu": [], "rss": []}
    assert any("ended before the monitor started" in w for w in monitor.warnings)


def _wait_without_reaping(pid: int) -> None:
    """Wait until `pid` exits, leaving it a zombie (its parent has not collected it)."""
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def test_a_process_that_exits_at_once(spawn):
    quick = spawn("pass")
    monitor = ResourceMonitor(0.05, gpus=["0"], nvidia_smi="/nonexistent/nvidia-smi",
                              nvml=None)
    monitor.start(quick.pid)
    quick.wait()  # exited and reaped: the tree is gone
    time.sleep(0.15)
    count = monitor.samples_taken
    time.sleep(0.15)
    assert monitor.samples_taken == count  # sampling stopped by itself
    began = time.monotonic()
    series = monitor.stop()
    assert time.monotonic() - began < 0.5
    assert set(series) == {"time", "cpu", "rss", ENERGY_UNAVAILABLE}
    assert len(series["time"]) == len(series["cpu"]) == len(series["rss"]) == count


def test_a_zombie_root_ends_sampling(spawn):
    quick = spawn("import time; print('ready', flush=True); time.sleep(0.3)")
    quick.stdout.readline()
    monitor = ResourceMonitor(0.05)
    monitor.start(quick.pid)
    _wait_without_reaping(quick.pid)
    time.sleep(0.15)
    count = monitor.samples_taken
    time.sleep(0.15)
    assert monitor.samples_taken == count  # sampling stopped by itself
    series = monitor.stop()
    assert 2 <= len(series["time"]) == count <= 10  # about 0.3 s / 0.05 s while it lived


@pytest.mark.parametrize("frequency", [0, -1, math.nan, math.inf, "1", True, None])
def test_a_bad_frequency_is_refused(frequency):
    with pytest.raises(ValueError, match="frequency"):
        ResourceMonitor(frequency)


def test_start_twice_is_refused(spawn):
    sleeper = spawn("import time; time.sleep(30)")
    monitor = ResourceMonitor(0.5)
    monitor.start(sleeper.pid)
    with pytest.raises(RuntimeError):
        monitor.start(sleeper.pid)
    monitor.stop()


def test_stop_without_start_gives_empty_series():
    assert ResourceMonitor(1.0).stop() == {"time": [], "cpu": [], "rss": []}
