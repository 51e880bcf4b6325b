"""Fixtures for the ONNX Runtime backend's tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from ort_helpers import run_backend


@pytest.fixture
def backend():
    """The ``run_backend`` function."""
    return run_backend


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory) -> Path:
    """A model cache shared by the tests of one session (an export costs seconds)."""
    return tmp_path_factory.mktemp("onnx_cache")


# `dlbs run` in a scratch folder, and the real services (they fail, never skip, when down).
from tests.run.conftest import run_dlbs  # noqa: E402,F401
from tests.targets.conftest import docker_client, slurm_cluster, test_image  # noqa: E402,F401
