"""Fixtures: real process trees to monitor, and the fake nvidia-smi."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest


@pytest.fixture
def spawn():
    """Start `python -c code` in a session of its own; its whole group is killed afterwards."""
    started: list[subprocess.Popen[str]] = []

    def start(code: str) -> subprocess.Popen[str]:
        process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                   text=True, start_new_session=True)
        started.append(process)
        return process

    yield start
    for process in started:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        process.stdout.close()


@pytest.fixture
def fake_smi_env(monkeypatch, tmp_path):
    """Environment of the fake nvidia-smi: returns the file its calls are logged to."""
    calls = tmp_path / "nvidia-smi-calls"
    for name in ("FAKE_NVIDIA_SMI_OUTPUT", "FAKE_NVIDIA_SMI_EXIT", "FAKE_NVIDIA_SMI_SLEEP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FAKE_NVIDIA_SMI_CALLS", str(calls))
    return calls
