"""Make the shared helpers of this folder importable; a store of each kind for its tests."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers_results import postgres_store_url  # noqa: E402

#: Both results stores: every test of the protocol runs on each (docs/results.md).
STORE_KINDS = [pytest.param("sqlite", id="sqlite"),
               pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(params=STORE_KINDS)
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where an empty store of each kind is: an SQLite path, or a PostgreSQL URL."""
    if request.param == "sqlite":
        yield str(tmp_path / "logs" / "results.db")
        return
    with postgres_store_url() as url:
        yield url
