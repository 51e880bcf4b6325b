"""Shared fixtures. Service fixtures (Docker, SLURM) live beside the tests that need them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The fuzz suite's budget: seconds per target (tests/fuzz). One knob: `--fuzz-seconds`, or
# DLBS_FUZZ_SECONDS in the environment (CI's default stays 15).
FUZZ_SECONDS = 15.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fuzz-seconds", type=float, metavar="S",
                     default=float(os.environ.get("DLBS_FUZZ_SECONDS", FUZZ_SECONDS)),
                     help=f"seconds each fuzz target runs (default: $DLBS_FUZZ_SECONDS, else "
                          f"{FUZZ_SECONDS:g})")


@pytest.fixture(scope="session")
def fuzz_seconds(request: pytest.FixtureRequest) -> float:
    """The fuzz budget per target (`--fuzz-seconds`)."""
    return request.config.getoption("--fuzz-seconds")


# Tests of the shared services run one after another on one xdist worker (scripts/test.sh
# runs `--dist loadgroup`): the SLURM cluster has two nodes, whose jobs' timing some tests
# measure, and some Docker and Podman tests check that the engine holds no container of
# theirs, which another test's container would be. Everything else runs where a worker is
# free. A test is a service test by its marker or by the fixture it takes.
SERVICES_GROUP = "services"
_SERVICE_MARKERS = ("docker", "slurm")
_SERVICE_FIXTURES = ("docker_client", "test_image", "podman_image", "slurm_cluster")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if any(item.get_closest_marker(name) for name in _SERVICE_MARKERS) or \
                any(name in fixtures for name in _SERVICE_FIXTURES):
            item.add_marker(pytest.mark.xdist_group(SERVICES_GROUP))


@pytest.fixture
def dlbs_cli():
    """Run `dlbs` as a subprocess; returns the CompletedProcess (text mode)."""

    def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        full_env = dict(os.environ)
        full_env.update(env or {})
        return subprocess.run([sys.executable, "-m", "dlbs.cli.main", *args], cwd=cwd or REPO,
                              env=full_env, capture_output=True, text=True, timeout=timeout)

    return run


# Property tests are judged on what they find, not on how fast a loaded 2-core CI machine
# runs them: no per-example deadline.
from hypothesis import settings  # noqa: E402

settings.register_profile("dlbs", deadline=None)
settings.load_profile("dlbs")
