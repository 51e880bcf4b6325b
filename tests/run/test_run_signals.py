"""Stop signals and `kill -9` of `dlbs run` on bare metal (issue 14, defects 1 and 2).

SIGINT, SIGTERM and SIGHUP sent to dlbs alone (as `kill`, systemd or a batch system sends
them, not a terminal's Ctrl-C to the whole group) stop the benchmark's process group, record
the attempt `interrupted` and exit with 128 + the signal's number. After a `kill -9` of dlbs,
the next run stops what the dead run left running before it runs anything.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.run.conftest import attempts, wait_until
from tests.run.conftest import pid_alive as _alive

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_warmup_batches=0"]
#: Long enough never to end by itself within a test.
LONG = ["-P", "dummy.sleep=1", "-P", "exp.num_batches=3600"]


def _background(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "run", *args],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


@pytest.fixture(autouse=True)
def _reap(tmp_path: Path):
    """Whatever a failed test left running in its folder goes with the test."""
    yield
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if os.readlink(proc / "cwd") == str(tmp_path):
                os.kill(int(proc.name), signal.SIGKILL)
        except OSError:
            continue


def _benchmarks_in(folder: Path) -> list[int]:
    """The dummy backends running with `folder` as their working directory."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if os.readlink(proc / "cwd") == str(folder) and len(argv) > 1 and \
                    argv[1].endswith(b"dummy_benchmarks/benchmarks.py"):
                found.append(int(proc.name))
        except OSError:
            continue
    return [pid for pid in found if _alive(pid)]


def _running_benchmark(tmp_path: Path) -> int:
    """The pid of the one benchmark of the sweep, once it runs (it printed its first line)."""
    wait_until(lambda: len(_benchmarks_in(tmp_path)) == 1, "the benchmark did not start")
    wait_until(lambda: any("dummy backend" in log.read_text(errors="replace")
                           for log in (tmp_path / "logs").glob("*.log")),
               "the backend did not print")
    (pid,) = _benchmarks_in(tmp_path)
    return pid


@pytest.mark.parametrize("number, status", [
    (signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_a_stop_signal_to_dlbs_alone_stops_the_benchmark_and_is_recorded(tmp_path, number,
                                                                         status):
    name = signal.Signals(number).name
    sweep = _background(tmp_path, *DUMMY, *LONG, "-V", "exp.replica_batch=[1, 2]")
    try:
        benchmark = _running_benchmark(tmp_path)
        os.kill(sweep.pid, number)
        _, err = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == status, err
    assert "Traceback" not in err
    assert f"dlbs: 1 interrupted (interrupted by {name})" in err
    ((_, _, state, message),) = attempts(tmp_path / "logs" / "results.db")  # nothing more ran
    assert state == "interrupted" and message.startswith(f"interrupted: dlbs run got {name}")
    wait_until(lambda: not _alive(benchmark), "the benchmark outlived dlbs", limit=30)


def test_a_second_signal_during_the_stop_still_records_everything(tmp_path):
    # The launcher shell ignores SIGINT and outlives the backend: dlbs waits out the grace
    # period before SIGKILL, unless a second signal says to stop now.
    holder = 'trap "" INT; "$@"; sleep 600'
    sweep = _background(tmp_path, *DUMMY, *LONG, "-P", f"runtime.launcher=sh -c '{holder}' hold")
    try:
        benchmark = _running_benchmark(tmp_path)
        os.kill(sweep.pid, signal.SIGTERM)
        wait_until(lambda: any("terminated by SIGINT" in log.read_text(errors="replace")
                               for log in (tmp_path / "logs").glob("*.log")),
                   "the backend did not get the stop")
        os.kill(sweep.pid, signal.SIGTERM)
        os.kill(sweep.pid, signal.SIGHUP)  # a third: changes nothing more
        _, err = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == 143, err  # the first signal's status
    assert "Traceback" not in err
    ((_, _, state, message),) = attempts(tmp_path / "logs" / "results.db")
    assert state == "interrupted" and message.startswith("interrupted: dlbs run got SIGTERM")
    wait_until(lambda: not _alive(benchmark), "the benchmark outlived dlbs", limit=30)
    assert not [p for p in Path("/proc").glob("[0-9]*") if _is_holder_of(p, tmp_path)]


def _is_holder_of(proc: Path, tmp_path: Path) -> bool:
    try:
        environ = (proc / "environ").read_bytes()
        cmdline = (proc / "cmdline").read_bytes()
    except OSError:
        return False
    return cmdline.startswith(b"sleep\x00600") and str(tmp_path).encode() in environ


def test_kill_9_of_dlbs_then_the_next_run_stops_what_it_left(run_dlbs, tmp_path):
    escaped = tmp_path / "escaped.pid"
    # A worker that left the benchmark's process group (setsid) still carries its mark.
    leaver = f"setsid sleep 600 & echo $! > '{escaped}'; exec \"$@\""
    sweep = _background(tmp_path, *DUMMY, *LONG, "-P", f"runtime.launcher=sh -c '{leaver}' l")
    benchmark = _running_benchmark(tmp_path)
    wait_until(lambda: escaped.exists() and escaped.read_text().strip(), "no worker started")
    worker = int(escaped.read_text())
    os.killpg(sweep.pid, signal.SIGKILL)  # dlbs's own group: the benchmark has its own
    sweep.communicate()
    try:
        assert _alive(benchmark) and _alive(worker)  # orphaned, still running
        result = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=0", "-P", "exp.num_batches=1",
                          "-P", "exp.model=next")
    finally:
        for pid in (benchmark, worker):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert result.returncode == 0, result.stderr
    assert not _alive(benchmark) and not _alive(worker)
    (old, new) = attempts(tmp_path / "logs" / "results.db")
    assert old[2] == "interrupted" and new[2] == "ok"
    assert "the next dlbs run stopped what it left running: 2 processes" in old[3]
    assert (f"stopped 2 processes (python, sleep), left running by a dlbs run that died "
            f"(experiment {old[0]}, attempt 1)") in result.stderr


def test_the_terminal_going_away_stops_the_sweep_and_loses_nothing(tmp_path):
    """SIGHUP as a real terminal sends it: the pty's master closes, writes to it fail after."""
    import fcntl
    import pty
    import termios

    master, slave = pty.openpty()

    def take_the_terminal() -> None:  # in the child, after setsid: the pty becomes its tty
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    sweep = subprocess.Popen(
        [sys.executable, "-m", "dlbs.cli.main", "run", *DUMMY, *LONG,
         "-V", "exp.replica_batch=[1, 2]"], cwd=tmp_path, stdin=slave, stdout=slave,
        stderr=slave, start_new_session=True, preexec_fn=take_the_terminal)
    os.close(slave)
    reader = _Drain(master)
    try:
        benchmark = _running_benchmark(tmp_path)
        reader.close_terminal()  # the kernel hangs the session up: SIGHUP
        sweep.wait(timeout=120)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
        reader.close_terminal()
    assert sweep.returncode == 129
    ((_, _, state, message),) = attempts(tmp_path / "logs" / "results.db")
    assert state == "interrupted" and message.startswith("interrupted: dlbs run got SIGHUP")
    wait_until(lambda: not _alive(benchmark), "the benchmark outlived dlbs", limit=30)


class _Drain:
    """Reads a pty's master side in the background (a full pty would block the writer)."""

    def __init__(self, master: int) -> None:
        import threading

        self.master: int | None = master
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while self.master is not None:
            try:
                if not os.read(self.master, 65536):
                    return
            except OSError:
                return

    def close_terminal(self) -> None:
        if self.master is not None:
            master, self.master = self.master, None
            os.close(master)
