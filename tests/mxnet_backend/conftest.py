"""Fixtures of the MXNet backend tests (helpers in mx_helpers.py)."""

from __future__ import annotations

import sys

import pytest
from mx_helpers import BENCHMARKS, BackendRun, run_process


@pytest.fixture
def run_backend():
    """Run `benchmarks.py` with the given flags (CPU unless the flags say otherwise)."""

    def run(*flags: str, timeout: float = 240) -> BackendRun:
        return run_process([sys.executable, str(BENCHMARKS), "--device", "cpu", *flags],
                           timeout=timeout)

    return run
