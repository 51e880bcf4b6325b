"""Helpers for run-loop tests: `dlbs run` as a user runs it, in a scratch folder."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest


@pytest.fixture
def run_dlbs(dlbs_cli, tmp_path: Path):
    """`dlbs run` (or any command) with cwd = tmp_path; logs land in tmp_path/logs."""

    def run(*args: str, timeout: float = 180, **kwargs):
        return dlbs_cli(*args, cwd=tmp_path, timeout=timeout, **kwargs)

    return run


def attempts(db: Path) -> list[tuple]:
    """(exp_id, attempt, status, status_msg) rows, oldest first."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT exp_id, attempt, status, status_msg FROM attempts "
                            "ORDER BY started_at, exp_id, attempt").fetchall()


# The real services: shared with the target tests (they fail, never skip, when down).
from tests.targets.conftest import docker_client, slurm_cluster, test_image  # noqa: E402,F401
