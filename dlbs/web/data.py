"""What the pages read: one store, opened read-only, its attempts cached until it changes.

A report over 100,000 experiments reads the store as columns once (stored_columns.py, about
a quarter of a second); later pages reuse them until an attempt is added or ends (the
store's change marker, one small query per page). Requests are served one at a time here:
the reader's connection and the cached columns are not shared between threads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dlbs.results.columns import Attempts
from dlbs.results.sources import load_attempts
from dlbs.results.store import Attempt, ResultsStore, open_store, store_name


class StoreData:
    """The store behind the pages (see the module)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.name = store_name(location)
        self._store: ResultsStore = open_store(location, read_only=True)
        self._lock = threading.Lock()
        self._marker: tuple[Any, ...] | None = None
        self._attempts: Attempts | None = None

    @contextmanager
    def reading(self) -> Iterator[StoreData]:
        """Hold the store for one request."""
        with self._lock:
            yield self

    def attempts(self) -> Attempts:
        """Every attempt as columns (what reports and histories read), fresh."""
        marker = self._store.change_marker()
        if self._attempts is None or marker != self._marker:
            self._attempts = load_attempts([self.location])
            self._marker = marker
        return self._attempts

    def runs(self) -> list[dict[str, Any]]:
        """Every run, newest first (see ResultsStore.runs)."""
        names = ("tag", "host", "folder", "attempts", "ok", "started", "ended")
        return [dict(zip(names, row)) for row in self._store.runs()]

    def tags(self) -> list[str]:
        """The run tags, newest first."""
        return list(dict.fromkeys(str(run["tag"]) for run in self.runs()
                                  if run["tag"] is not None))

    def experiment(self, exp_id: str) -> list[Attempt]:
        """Every attempt of one experiment, oldest first."""
        return self._store.attempts(exp_id)

    def close(self) -> None:
        """Close the store."""
        self._store.close()
