"""Fixtures of the report tests: records as the loaders make them, real dummy-backend runs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dlbs.results.sources import Detail, Record, with_engine_values

REPO = Path(__file__).resolve().parents[2]
SUMMARIES = Detail(summaries=True, samples=True, all_attempts=True)


def record(values: dict[str, Any], recency: float = 0.0, source: str = "test",
           environment: dict[str, Any] | None = None) -> Record:
    """A record of one attempt as the loaders make it: the statistics engine applied."""
    made = with_engine_values(values, SUMMARIES)
    made.recency, made.source, made.environment = recency, source, environment or {}
    return made


def records(*items: dict[str, Any]) -> list[Record]:
    """Records in reading order; later items are newer."""
    return [record(item, float(index)) for index, item in enumerate(items)]


def dummy_run(folder: Path, *args: str, timeout: float = 300,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`dlbs run` of the dummy backend with its logs in `folder` (a real sweep)."""
    environment = dict(os.environ)
    environment.update(env or {})
    command = [sys.executable, "-m", "dlbs.cli.main", "run", "-P", "exp.framework=dummy",
               "-P", f"exp.log_dir={folder}", "-P", "exp.num_warmup_batches=1", *args]
    return subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture
def dlbs() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`dlbs ARGS` as a subprocess, from the repository."""

    def run(*args: str, cwd: Path | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dlbs.cli.main", *args], cwd=cwd or REPO,
                              capture_output=True, text=True, timeout=timeout, check=False)
    return run
