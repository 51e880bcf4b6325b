"""Fixtures: real process trees to monitor, the fake nvidia-smi and the fake NVML."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

FAKE_NVML = Path(__file__).resolve().parent / "data" / "fake_nvml" / "pynvml.py"


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


@pytest.fixture
def fake_nvml(monkeypatch, tmp_path):
    """The stand-in pynvml as a module of its own (its knobs cleared, its calls logged)."""
    for name in ("FAKE_NVML_GPUS", "FAKE_NVML_NO_ENERGY", "FAKE_NVML_INIT_ERROR",
                 "FAKE_NVML_HANG", "FAKE_NVML_RAISE", "FAKE_NVML_ENERGY_OFFSET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FAKE_NVML_CALLS", str(tmp_path / "nvml-calls"))
    spec = importlib.util.spec_from_file_location("fake_pynvml", FAKE_NVML)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
