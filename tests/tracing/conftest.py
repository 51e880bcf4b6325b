"""Helpers of the trace tests: traces written by hand, event by event."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest


def write_trace(path: Path, events: list[dict[str, Any]], meta: dict[str, Any] | None = None,
                compressed: bool = True, array: bool = False) -> Path:
    """A Chrome trace of `events` (an object with dlbs metadata first, or a bare array)."""
    document: Any = events if array else {
        **({"dlbs": meta} if meta is not None else {}), "traceEvents": events}
    data = json.dumps(document).encode()
    path.write_bytes(gzip.compress(data) if compressed else data)
    return path


def span(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args: Any) -> dict:
    """A complete event."""
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid,
            "args": args}


@pytest.fixture
def trace_of(tmp_path):
    """Write `events` to a fresh trace file; returns its path."""
    counter = iter(range(1_000_000))

    def make(events: list[dict[str, Any]], **options: Any) -> Path:
        suffix = ".json.gz" if options.get("compressed", True) else ".json"
        return write_trace(tmp_path / f"trace{next(counter)}{suffix}", events, **options)

    return make


# The real Docker Engine and its test image, for test_trace_docker.py (they fail, never skip,
# when the engine is down).
from tests.run.conftest import run_dlbs  # noqa: E402,F401
from tests.targets.conftest import docker_client, test_image  # noqa: E402,F401
