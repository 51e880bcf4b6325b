"""What the pages read: one store, read-only, by many requests at once; cached per version.

Starlette runs each page in a worker thread, so requests are answered at once. A request
borrows a read-only connection from a small pool (`connection()`) only while it reads the
store: the change marker, the runs, one experiment's attempts. A connection is never used by
two threads at a time, and a page that computes long (a report, a comparison, a history over
100,000 experiments) holds none while it computes, so a quick page never waits for a slow
one to give its connection back.

Pages that compute over every attempt are *heavy*: at most `heavy` of them are built at a
time, and at most `waiting` more wait for their turn; beyond that a request is answered at
once with "busy" (HTTP 503), so the work and the memory of a burst of requests are bounded
and the quick pages keep their share of the two cores.

The attempts as columns (stored_columns.py, about a quarter of a second for 100,000
experiments) are read once per *version* of the store, its change marker (one query that
reads two indexes: the newest rowid and the count of open attempts, which change whenever
an attempt is added or ends), and shared by every request of that version; the part's own
connection and lazy reads take its lock. So are the runs, and the histories (`history`: a
history over one grouping, filter and metric; other thresholds judge it again in
milliseconds). A page that depends on the store alone is kept per version too (`Pages`):
asked again with nothing added, it is answered from memory; a new attempt is a new version,
and every page is built afresh.
"""

from __future__ import annotations

import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from dlbs.errors import DlbsError
from dlbs.results.columns import Attempts
from dlbs.results.sources import load_attempts
from dlbs.results.store import Attempt, ResultsStore, open_store, store_name

#: Read-only connections at most (PostgreSQL: sessions of the server; SQLite: handles).
CONNECTIONS = 4
#: Heavy pages built at once, and more waiting their turn before "busy".
HEAVY = 2
WAITING = 4
#: Pages kept per version, and their bytes at most (a report's CSV may be megabytes).
CACHED_PAGES = 64
CACHED_BYTES = 64 * 2**20
#: Histories kept per version (one per grouping, filter and metric asked for).
CACHED_HISTORIES = 4


class Busy(DlbsError):
    """Too many heavy pages asked at once: answered at once, to be asked again."""


class StoreData:
    """The store behind the pages (see the module)."""

    def __init__(self, location: str, connections: int = CONNECTIONS, heavy: int = HEAVY,
                 waiting: int = WAITING) -> None:
        self.location = location
        self.name = store_name(location)
        self._idle: queue.LifoQueue[ResultsStore] = queue.LifoQueue()
        self._opened: list[ResultsStore] = []
        self._slots = threading.BoundedSemaphore(connections)
        self._open_lock = threading.Lock()
        self._idle.put(self._open())   # now: a store that cannot be read fails at start
        self._load_lock = threading.Lock()
        self._snapshot: tuple[tuple[Any, ...], Attempts] | None = None
        self._heavy = threading.BoundedSemaphore(heavy)
        self._queue = threading.BoundedSemaphore(heavy + waiting)
        self._kept_lock = threading.Lock()
        self._runs: tuple[tuple[Any, ...], list[dict[str, Any]]] | None = None
        self._histories: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self.pages = Pages()

    def _open(self) -> ResultsStore:
        store = open_store(self.location, read_only=True)
        with self._open_lock:
            self._opened.append(store)
        return store

    @contextmanager
    def connection(self) -> Iterator[ResultsStore]:
        """A connection of this thread's own while the block lasts (see the module)."""
        with self._slots:
            try:
                store = self._idle.get_nowait()
            except queue.Empty:
                store = self._open()
            try:
                yield store
            finally:
                self._idle.put(store)

    @contextmanager
    def reading(self) -> Iterator[Reader]:
        """A reader for one request (it borrows a connection for each read)."""
        yield Reader(self)

    @contextmanager
    def heavy(self) -> Iterator[None]:
        """A turn to build a heavy page; Busy at once when too many wait (see the module)."""
        if not self._queue.acquire(blocking=False):
            raise Busy("the server is building as many pages as it may; ask again in a moment",
                       hint="a report, comparison or history over many experiments takes a "
                            "while; narrow it with --filter")
        try:
            with self._heavy:
                yield
        finally:
            self._queue.release()

    def attempts(self, version: tuple[Any, ...]) -> Attempts:
        """Every attempt as columns, as of `version` or later (read once per version)."""
        with self._load_lock:
            if self._snapshot is None or self._snapshot[0] != version:
                # Read after the marker: what it reads is at least that version.
                self._snapshot = (version, load_attempts([self.location]))
            return self._snapshot[1]

    def runs(self, version: tuple[Any, ...]) -> list[dict[str, Any]]:
        """Every run, newest first (see ResultsStore.runs), read once per version."""
        with self._kept_lock:
            if self._runs is not None and self._runs[0] == version:
                return self._runs[1]
        names = ("tag", "host", "folder", "attempts", "ok", "started", "ended")
        with self.connection() as store:
            found = [dict(zip(names, row)) for row in store.runs()]
        with self._kept_lock:
            self._runs = (version, found)
        return found

    def kept(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """What `build` makes for `key` (a version first), kept for the few newest keys."""
        with self._kept_lock:
            if key in self._histories:
                self._histories.move_to_end(key)
                return self._histories[key]
        made = build()
        with self._kept_lock:
            self._histories[key] = made
            for old in [k for k in self._histories if k[0] != key[0]]:
                del self._histories[old]
            while len(self._histories) > CACHED_HISTORIES:
                self._histories.popitem(last=False)
        return made

    def close(self) -> None:
        """Close every connection (at shutdown)."""
        with self._open_lock:
            for store in self._opened:
                store.close()
            self._opened.clear()
        self._snapshot = None


class Reader:
    """What one request reads; each read borrows a connection (see StoreData.connection)."""

    def __init__(self, data: StoreData) -> None:
        self._data = data
        self._version: tuple[Any, ...] | None = None

    @property
    def name(self) -> str:
        """The store as pages name it (a URL without its password)."""
        return self._data.name

    def version(self) -> tuple[Any, ...]:
        """The store's change marker, read once per request."""
        if self._version is None:
            with self._data.connection() as store:
                self._version = tuple(store.change_marker())
        return self._version

    def attempts(self) -> Attempts:
        """Every attempt as columns (what reports and histories read), fresh."""
        return self._data.attempts(self.version())

    def runs(self) -> list[dict[str, Any]]:
        """Every run, newest first (see ResultsStore.runs)."""
        return self._data.runs(self.version())

    def tags(self) -> list[str]:
        """The run tags, newest first."""
        return list(dict.fromkeys(str(run["tag"]) for run in self.runs()
                                  if run["tag"] is not None))

    def experiment(self, exp_id: str) -> list[Attempt]:
        """Every attempt of one experiment, oldest first."""
        with self._data.connection() as store:
            return store.attempts(exp_id)

    def kept(self, name: str, build: Callable[[], Any]) -> Any:
        """What `build` makes from this version of the store, kept for the next requests."""
        return self._data.kept((self.version(), name), build)

    def history(self, by: Sequence[str] | None, filters: Sequence[Any], metric: str) -> Any:
        """The history of one grouping, filter set and metric (kept per version)."""
        from dlbs.history import build_history

        key = (self.version(), tuple(by or ()), tuple(filters), metric)
        return self._data.kept(key, lambda: build_history(
            self.attempts(), by=by, filters=filters, metric=metric))


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
