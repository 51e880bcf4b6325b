"""The traced pass: after the timed batches, a few more under mx.profiler (docs/tracing.md).

Levels add to each other: `step` records each batch and its phases (data wait, forward,
backward, optimizer: `trainer.step`, which also aggregates the gradients when there are
several contexts or workers); `layer` one span per call of every Gluon block, named as the
model names its blocks (forward hooks: an imperative network only, nothing is renamed, so
saved parameters keep their names); `operator` adds MXNet's operators (mx.profiler);
`kernel` is `operator` on a GPU (MXNet's profiler times operators on their device, not the
CUDA kernels inside them); `full` adds MXNet's memory counters.

MXNet's engine is asynchronous: every span ends with `mx.nd.waitall()`, so a span's time is
the work's, not the time it took to queue it. Nothing here runs before the timed loop has
ended; the hooks are added for the traced pass and removed after it. With a `dist_*`
kvstore every worker runs the traced batches (their gradients meet on the servers); worker
0 alone records them.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import mxnet as mx
from benchmark_common.flags import traces_at_least as at_least

from . import trace_file
from .trace_file import LAYER, PHASE, STEP

_NO_SPAN = contextlib.nullcontext()


class _Spans:
    """Opens and closes spans; this one records nothing (workers other than 0)."""

    def __init__(self, records: bool = False) -> None:
        self.records = records
        self.events: list[dict[str, Any]] = []
        self._open: list[tuple[str, str, int]] = []
        self._ids = (os.getpid(), threading.get_native_id())

    def open(self, category: str, name: str) -> None:
        if self.records:
            self._open.append((category, name, time.time_ns()))

    def close(self) -> None:
        if not self.records:
            return
        end = time.time_ns()
        category, name, start = self._open.pop()
        # MXNet's profiler stamps its events in microseconds since the epoch: the same clock.
        self.events.append({"ph": "X", "cat": category, "name": name,
                            "ts": round(start / 1000.0, 3), "dur": round((end - start) / 1000.0, 3),
                            "pid": self._ids[0], "tid": self._ids[1]})

    @contextlib.contextmanager
    def span(self, category: str, name: str) -> Iterator[None]:
        self.open(category, name)
        try:
            yield
        finally:
            mx.nd.waitall()
            self.close()


class Tracer:
    """Records the traced pass of one process and writes its trace (worker 0)."""

    def __init__(self, level: str, batches: int, path: str, records: bool,
                 meta: dict[str, Any]) -> None:
        self.level = level
        self.batches = batches
        self.path = os.path.abspath(path)
        self.records = records
        self.meta = meta
        self.spans = _Spans()
        self._active = False

    def phase(self, name: str) -> contextlib.AbstractContextManager:
        """A span of one part of a step; in the timed loop, nothing at all (no span, no wait)."""
        return self.spans.span(PHASE, name) if self._active else _NO_SPAN

    def run(self, next_batch: Callable[[], tuple[list, list]],
            step: Callable[[list, list], None], net: Any, eager: bool) -> dict[str, Any]:
        """Trace the batches; the protocol keys to print (worker 0)."""
        layer_spans = at_least(self.level, "layer") and eager
        profiled = self.records and at_least(self.level, "operator")
        self.spans = _Spans(self.records)
        self._active = True
        handles = _add_layer_hooks(net, self.spans) if layer_spans and self.records else []
        exported = ""
        unwritable: OSError | None = None
        try:
            mx.nd.waitall()
            if profiled:
                try:
                    exported = self._start_profiler()
                except OSError as error:  # the batches still run: the other workers need them
                    unwritable, profiled = error, False
            for _ in range(self.batches):
                with self.spans.span(STEP, "step"):
                    with self.spans.span(PHASE, "data_wait"):
                        data, labels = next_batch()
                    step(data, labels)
            if profiled:
                mx.profiler.set_state("stop")
                mx.profiler.dump(finished=True)
            spans = self.spans.events
        finally:
            for handle in handles:
                handle.detach()
            self.spans = _Spans()
            self._active = False
        if not self.records:
            return {}
        try:
            if unwritable is not None:
                raise unwritable
            events = trace_file.merge_events(spans, _load(exported) if exported else [])
            trace_file.nest_spans(events, _block_types(net) if layer_spans else {})
            meta = {**self.meta, "trace_level": self.level, "trace_batches": self.batches,
                    "layer_spans": layer_spans}
            trace_file.write_trace(self.path, meta, events)
        except OSError as error:
            return {"results.trace_error": f"cannot write the trace {self.path}: "
                                           f"{error.strerror or error}"}
        finally:
            if exported:
                os.unlink(exported)
        return {"results.trace_file": self.path}

    def _start_profiler(self) -> str:
        folder = os.path.dirname(self.path)
        os.makedirs(folder, exist_ok=True)
        handle, exported = tempfile.mkstemp(prefix=".mxnet_trace.", suffix=".json", dir=folder)
        os.close(handle)
        mx.profiler.set_config(profile_symbolic=True, profile_imperative=True,
                               profile_memory=at_least(self.level, "full"), profile_api=False,
                               aggregate_stats=False, continuous_dump=False, filename=exported)
        mx.profiler.set_state("run")
        return exported


def _load(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as stream:
        document = json.load(stream)
    events = document.get("traceEvents", []) if isinstance(document, dict) else document
    return [event for event in events if isinstance(event, dict)]


def _blocks(net: Any) -> list[Any]:
    """The network and every block in it (Block.apply visits each once)."""
    found: list[Any] = []
    net.apply(found.append)
    return found


def _block_types(net: Any) -> dict[str, dict[str, str]]:
    return {block.name: {"type": type(block).__name__} for block in _blocks(net)}


def _add_layer_hooks(net: Any, spans: _Spans) -> list[Any]:
    """A forward pre-hook that opens each block's span and a forward hook that closes it."""
    handles = []
    for block in _blocks(net):

        def opened(block: Any, inputs: Any) -> None:
            spans.open(LAYER, block.name)

        def closed(block: Any, inputs: Any, output: Any) -> None:
            mx.nd.waitall()
            spans.close()

        handles.append(block.register_forward_pre_hook(opened))
        handles.append(block.register_forward_hook(closed))
    return handles


def in_phase(step: Callable[[list, list], None], name: str,
             tracer: Tracer) -> Callable[[list, list], None]:
    """`step` as one phase (an inference step is all forward)."""

    def traced(data: list, labels: list) -> None:
        with tracer.phase(name):
            step(data, labels)

    return traced
