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
from tests.targets.conftest import (  # noqa: E402,F401
    docker_client,
    podman_image,
    slurm_cluster,
    test_image,
)


def gated(release: Path) -> list[str]:
    """A `runtime.launcher` that holds the benchmark back until `release` exists.

    The attempt is open meanwhile (recorded started, its log begun): a state a test can wait
    for and act in, instead of sleeping and hoping.
    """
    script = f'while [ ! -e "{release}" ]; do sleep 0.05; done; exec "$@"'
    return ["-P", f"runtime.launcher=sh -c '{script}' gate"]


def wait_until(condition, what: str, limit: float = 120) -> None:
    """Poll `condition()` until true; fail naming `what` after `limit` seconds."""
    import time

    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def open_attempts(db: Path) -> int:
    """Attempts recorded started and not ended (0 while there is no database)."""
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT COUNT(*) FROM attempts WHERE ended_at IS NULL"
                                ).fetchone()[0]
    except sqlite3.Error:
        return 0


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
