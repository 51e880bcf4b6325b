"""Fixtures of the evaluation tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The test modules import the backends' shared package (python/benchmark_common) in-process.
PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


@pytest.fixture
def run_dlbs(dlbs_cli, tmp_path: Path):
    """`dlbs` as a user runs it, in tmp_path (logs land in tmp_path/logs)."""

    def run(*args: str, timeout: float = 300):
        return dlbs_cli(*args, cwd=tmp_path, timeout=timeout,
                        env={"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""})

    return run
