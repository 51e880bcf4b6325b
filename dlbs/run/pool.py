"""Local and Docker experiments at once, each on its own GPUs (`runtime.max_parallel`).

Each experiment runs its target in a worker thread (the run loop's thread only keeps the
books: the results store is used from it alone). An experiment may start when fewer than
`max_parallel` run and none of them uses any of its GPUs; an experiment without GPUs (CPU)
runs alone, whatever `max_parallel` says, since experiments on one CPU disturb each other.
`blocked()` reserves the GPUs of an experiment that had to wait, so that later experiments
of the plan never overtake it for good.

A worker may report on the way (`report(value)`, given to its work): the reports reach
`on_report(key, value)` in the loop's thread, in order, before the work's result.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

#: What a worker puts in the queue: its result, an exception (a bug), or a report on the way.
_RESULT, _ERROR, _REPORT = "result", "error", "report"


@dataclass
class _Running:
    key: Any
    gpus: frozenset[str]
    thread: threading.Thread


@dataclass
class ProcessPool:
    """Worker threads for process targets; see the module doc."""

    max_parallel: int = 1
    #: Called in the loop's thread with (key, value) for each report of a worker.
    on_report: Callable[[Any, Any], None] | None = None
    _running: dict[int, _Running] = field(default_factory=dict)
    _reserved: set[str] = field(default_factory=set)
    _exclusive_waiting: bool = False
    _done: queue.Queue[tuple[int, str, Any]] = field(default_factory=queue.Queue)
    _next: int = 0

    @property
    def running(self) -> int:
        """Experiments running now."""
        return len(self._running)

    def new_round(self) -> None:
        """Forget the reservations of the last pass over the plan."""
        self._reserved.clear()
        self._exclusive_waiting = False

    def can_start(self, gpus: Iterable[str]) -> bool:
        """Whether an experiment on `gpus` (none: CPU) may start now."""
        wanted = frozenset(gpus)
        if self._exclusive_waiting:
            return False
        if not wanted:
            return not self._running
        if len(self._running) >= max(1, self.max_parallel):
            return False
        busy = set(self._reserved)
        for running in self._running.values():
            if not running.gpus:
                return False
            busy |= running.gpus
        return not (wanted & busy)

    def blocked(self, gpus: Iterable[str]) -> None:
        """An experiment that could not start keeps its GPUs (or, CPU, the machine) reserved."""
        wanted = frozenset(gpus)
        if wanted:
            self._reserved |= wanted
        else:
            self._exclusive_waiting = True

    def start(self, key: Any, gpus: Iterable[str],
              work: Callable[[Callable[[Any], None]], Any]) -> None:
        """Run `work(report)` in a worker thread; its result comes back from `finished()`."""
        number = self._next
        self._next += 1

        def report(value: Any) -> None:
            self._done.put((number, _REPORT, value))

        def run() -> None:
            try:
                self._done.put((number, _RESULT, work(report)))
            except BaseException as error:  # noqa: BLE001 - handed to the loop's thread
                self._done.put((number, _ERROR, error))

        thread = threading.Thread(target=run, name=f"dlbs-experiment-{number}", daemon=True)
        self._running[number] = _Running(key, frozenset(gpus), thread)
        thread.start()

    def finished(self, timeout: float) -> list[tuple[Any, Any]]:
        """(key, result) of the experiments that ended, waiting up to `timeout` for one.

        Reports that came meanwhile go to `on_report` first (a report alone ends the wait).
        An exception raised by a worker (a bug) is raised here, in the loop's thread.
        """
        results = []
        try:
            item = self._done.get(timeout=timeout) if timeout > 0 else self._done.get_nowait()
        except queue.Empty:
            return results
        while True:
            number, kind, value = item
            if kind == _REPORT:
                if self.on_report is not None:
                    self.on_report(self._running[number].key, value)
            else:
                running = self._running.pop(number)
                running.thread.join()
                if kind == _ERROR:
                    raise value
                results.append((running.key, value))
            try:
                item = self._done.get_nowait()
            except queue.Empty:
                return results
