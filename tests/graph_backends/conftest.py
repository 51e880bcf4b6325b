"""Fixtures for the graph-backend tests: `dlbs run` in a scratch folder."""

from tests.run.conftest import run_dlbs  # noqa: F401
