"""Fixtures of the evaluation tests."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import zygotes

# The test modules import the backends' shared package (python/benchmark_common) in-process.
PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


@pytest.fixture
def run_dlbs(dlbs_cli, tmp_path: Path, request: pytest.FixtureRequest):
    """`dlbs` as a user runs it, in tmp_path (logs land in tmp_path/logs)."""
    if request.node.get_closest_marker("pytorch"):  # its backends' server (tests/zygotes.py)
        zygotes.ensure("torch", {"OMP_NUM_THREADS": "1"})

    def run(*args: str, timeout: float = 300):
        return dlbs_cli(*args, cwd=tmp_path, timeout=timeout,
                        env={"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""})

    return run


@pytest.fixture(autouse=True)
def signals_as_they_were() -> Iterator[None]:
    """The wakeup fd an in-process evaluation set is taken back when its test ends.

    The harness reports SIGTERM and SIGINT through the wakeup fd and a thread of its own, once
    a process (benchmark_common.harness.guarded): in a pytest worker it outlived the test, and
    a later test's Ctrl-C reached that test's `abort` instead of its own handler.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    try:
        yield
    finally:
        signal.set_wakeup_fd(before)
