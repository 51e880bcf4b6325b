"""tests/zygote: a backend run that dlbs starts, forked from a server, is what the script was.

The server here imports `sqlite3` (small, and a module the script does not import) and runs a
script whose path ends as the PyTorch backend's does; each case compares the run through the
server with the same command run by a fresh interpreter (`DLBS_TEST_ZYGOTE=0`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import zygotes
from tests.unit.test_preloaded import SCRIPT

SIGNALLED = r'''
import os, signal, sys, time
def stop(number, frame):
    print("got", signal.Signals(number).name, flush=True)
    sys.exit(7)
signal.signal(signal.SIGTERM, stop)
print("pid", os.getpid(), flush=True)
time.sleep(60)
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A `torch` server of `sqlite3`, in a folder of its own; its folder."""
    folder = tmp_path_factory.mktemp("zygote")
    env = {**os.environ, "PYTHONPATH": str(zygotes.ZYGOTE_DIR)}
    started = subprocess.Popen([sys.executable, str(zygotes.ZYGOTE_DIR / "server.py"),
                                str(folder / "torch.json"), json.dumps(["sqlite3"])],
                               stdin=subprocess.PIPE, env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while not (folder / "torch.json").exists():
        assert started.poll() is None and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield folder
    assert started.stdin is not None
    started.stdin.close()
    started.wait(timeout=30)
    assert not (folder / "torch.json").exists() and not (folder / "torch.sock").exists()


@pytest.fixture
def backend(tmp_path) -> Path:
    """A script where the PyTorch backend's would be."""
    path = tmp_path / "pytorch_benchmarks" / "benchmarks.py"
    path.parent.mkdir()
    path.write_text(SCRIPT)
    return path


def environment(server: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(zygotes.ZYGOTE_DIR), "DLBS_TEST_ZYGOTE": str(server),
            "DLBS_ATTEMPT": "a-token", "X": "1", "PYTHONUNBUFFERED": "1", **extra}


def run(script: Path, what: str, env: dict[str, str], cwd: Path):
    return subprocess.run([sys.executable, str(script), what], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60)


@pytest.mark.parametrize("what", ["ok", "exit3", "exit-text", "raise", "sigterm", "interrupt",
                                  "atexit"])
def test_a_forked_run_ends_and_prints_as_the_script_does(server, backend, tmp_path, what):
    forked = run(backend, what, environment(server), tmp_path)
    alone = run(backend, what, environment(server, DLBS_TEST_ZYGOTE="0"), tmp_path)
    assert "sqlite3 True" in forked.stdout and "sqlite3 False" in alone.stdout  # forked, fresh
    assert (forked.returncode, forked.stdout.replace("sqlite3 True", "sqlite3 False"),
            forked.stderr) == (alone.returncode, alone.stdout, alone.stderr)


@contextlib.contextmanager
def waiting_run(server: Path, backend: Path, cwd: Path) -> Iterator[tuple[subprocess.Popen, int]]:
    """A run that waits for a signal: the process started, and the forked run's pid."""
    backend.write_text(SIGNALLED)
    with subprocess.Popen([sys.executable, str(backend)], stdout=subprocess.PIPE, text=True,
                          env=environment(server), cwd=cwd) as process:
        assert process.stdout is not None
        child = int(process.stdout.readline().split()[1])
        assert child != process.pid  # the server's child
        yield process, child


def test_a_signal_to_the_process_dlbs_started_reaches_the_run(server, backend, tmp_path):
    with waiting_run(server, backend, tmp_path) as (process, _):
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 7
        assert process.stdout.read() == "got SIGTERM\n"


def test_a_sigkill_of_the_process_dlbs_started_ends_the_run(server, backend, tmp_path):
    with waiting_run(server, backend, tmp_path) as (process, child):
        process.kill()
        process.wait(timeout=30)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not Path(f"/proc/{child}").exists(), "the forked run outlived its client"


@pytest.mark.parametrize("extra", [{"OMP_NUM_THREADS": "3"}, {"DLBS_ATTEMPT": ""},
                                   {"RANK": "0"}, {"DLBS_TEST_ZYGOTE": "/nonexistent"}])
def test_what_the_server_cannot_run_as_the_interpreter_would_starts_as_it_is(server, backend,
                                                                             tmp_path, extra):
    env = environment(server, **extra)
    if extra.get("DLBS_ATTEMPT") == "":
        del env["DLBS_ATTEMPT"]
    result = run(backend, "ok", env, tmp_path)
    assert result.returncode == 0 and "sqlite3 False" in result.stdout
    if "OMP_NUM_THREADS" in extra:
        assert "torch OMP_NUM_THREADS" in (server / "misses.log").read_text()


def test_another_script_starts_as_it_is(server, tmp_path):
    other = tmp_path / "pytorch_benchmarks" / "other.py"
    other.parent.mkdir()
    other.write_text(SCRIPT)
    result = run(other, "ok", environment(server), tmp_path)
    assert result.returncode == 0 and "sqlite3 False" in result.stdout
