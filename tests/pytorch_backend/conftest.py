"""Fixtures for the PyTorch backend's tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytorch_backend_helpers import TINY_MODELS, make_image_folder, run_backend


@pytest.fixture
def backend():
    """The ``run_backend`` function."""
    return run_backend


@pytest.fixture(scope="session")
def extra_models(tmp_path_factory) -> Path:
    """A --extra_models file with a tiny CNN, a model of known duration and one that OOMs."""
    path = tmp_path_factory.mktemp("models") / "tiny_models.py"
    path.write_text(TINY_MODELS)
    return path


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory) -> Path:
    """A 3-class, 12-image ImageFolder dataset."""
    return make_image_folder(tmp_path_factory.mktemp("images") / "train")
