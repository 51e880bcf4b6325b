"""What the pages read: one store, read-only, by many requests at once; cached per version.

Starlette runs each page in a worker thread, so requests are answered at once, and a quick
page never waits for a slow one. Each request borrows a read-only connection of its own
from a small pool (`reading()`): a connection is never used by two threads at a time.

The attempts as columns (stored_columns.py, about a quarter of a second for 100,000
experiments) are read once per *version* of the store, its change marker (one query that
reads two indexes: the newest rowid and the count of open attempts, which change whenever
an attempt is added or ends), and shared by every request of that version; the part's own
connection and lazy reads take its lock. A page that depends on the store alone is kept per
version too (`Pages`): asked again with nothing added, it is answered from memory; a new
attempt is a new version, and every page is built afresh.
"""

from __future__ import annotations

import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dlbs.results.columns import Attempts
from dlbs.results.sources import load_attempts
from dlbs.results.store import Attempt, ResultsStore, open_store, store_name

#: Read-only connections at most (PostgreSQL: sessions of the server; SQLite: handles).
CONNECTIONS = 4
#: Pages kept per version, and their bytes at most (a report's CSV may be megabytes).
CACHED_PAGES = 64
CACHED_BYTES = 64 * 2**20


class StoreData:
    """The store behind the pages (see the module)."""

    def __init__(self, location: str, connections: int = CONNECTIONS) -> None:
        self.location = location
        self.name = store_name(location)
        self._idle: queue.LifoQueue[ResultsStore] = queue.LifoQueue()
        self._opened: list[ResultsStore] = []
        self._slots = threading.BoundedSemaphore(connections)
        self._open_lock = threading.Lock()
        self._idle.put(self._open())   # now: a store that cannot be read fails at start
        self._load_lock = threading.Lock()
        self._snapshot: tuple[tuple[Any, ...], Attempts] | None = None
        self.pages = Pages()

    def _open(self) -> ResultsStore:
        store = open_store(self.location, read_only=True)
        with self._open_lock:
            self._opened.append(store)
        return store

    @contextmanager
    def reading(self) -> Iterator[Reader]:
        """A reader for one request, over a connection of its own while it lasts."""
        with self._slots:
            try:
                store = self._idle.get_nowait()
            except queue.Empty:
                store = self._open()
            try:
                yield Reader(self, store)
            finally:
                self._idle.put(store)

    def attempts(self, version: tuple[Any, ...]) -> Attempts:
        """Every attempt as columns, as of `version` or later (read once per version)."""
        with self._load_lock:
            if self._snapshot is None or self._snapshot[0] != version:
                # Read after the marker: what it reads is at least that version.
                self._snapshot = (version, load_attempts([self.location]))
            return self._snapshot[1]

    def close(self) -> None:
        """Close every connection (at shutdown)."""
        with self._open_lock:
            for store in self._opened:
                store.close()
            self._opened.clear()
        self._snapshot = None


class Reader:
    """What one request reads, through its own connection (see StoreData.reading)."""

    def __init__(self, data: StoreData, store: ResultsStore) -> None:
        self._data = data
        self._store = store
        self._version: tuple[Any, ...] | None = None

    @property
    def name(self) -> str:
        """The store as pages name it (a URL without its password)."""
        return self._data.name

    def version(self) -> tuple[Any, ...]:
        """The store's change marker, read once per request."""
        if self._version is None:
            self._version = tuple(self._store.change_marker())
        return self._version

    def attempts(self) -> Attempts:
        """Every attempt as columns (what reports and histories read), fresh."""
        return self._data.attempts(self.version())

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


class Pages:
    """Pages that depend on the store alone, by (version, request), least recent out first."""

    def __init__(self, entries: int = CACHED_PAGES, size: int = CACHED_BYTES) -> None:
        self._entries = entries
        self._size = size
        self._kept: OrderedDict[tuple[Any, ...], tuple[int, Any]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...], build: Callable[[], tuple[int, Any]]) -> Any:
        """The page of `key`, built by `build` -> (size in bytes, page) when not kept."""
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
                return found[1]
        size, page = build()   # outside the lock: other pages are built meanwhile
        if size > self._size // 4:
            return page
        with self._lock:
            if key not in self._kept:
                self._kept[key] = (size, page)
                self._bytes += size
            while len(self._kept) > self._entries or self._bytes > self._size:
                _, (dropped, _) = self._kept.popitem(last=False)
                self._bytes -= dropped
        return page
