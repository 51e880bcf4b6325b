"""The traced pass: after the timed batches, a few more under torch.profiler (docs/tracing.md).

Levels add to each other: `step` records each batch and its phases (data wait, forward,
backward, optimizer); `layer` one span per call of every module, nested as the model is
(forward hooks, eager models only); `operator` runs torch.profiler over the CPU; `kernel`
adds CUDA activity (kernels, copies, memsets); `full` adds memory, input shapes and stacks.
`step` and `layer` need no profiler: their spans are timed here with `perf_counter_ns`.
On a GPU every span ends with a synchronize, so a span's time is the device's, not the
time it took to queue the work.

Nothing here runs before the timed loop has ended, nor touches what it measured: the hooks
are added for the traced pass and removed after it. Under DDP every rank runs the traced
batches (their collectives need each other); rank 0 alone records them.
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

import torch
import torch.nn as nn

from . import trace_file
from .trace_file import LAYER, PHASE, STEP, span_label
from .trace_flags import TraceOptions

Batch = tuple[torch.Tensor, torch.Tensor]


class _Spans:
    """Opens and closes named spans; this one records nothing (ranks other than 0)."""

    def open(self, category: str, name: str) -> None:
        pass

    def close(self) -> None:
        pass

    @contextlib.contextmanager
    def span(self, category: str, name: str, sync: Callable[[], None]) -> Iterator[None]:
        self.open(category, name)
        try:
            yield
        finally:
            sync()
            self.close()


class _TimedSpans(_Spans):
    """Spans timed here (levels step and layer): complete events on the calling thread."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._open: list[tuple[str, str, int]] = []
        self._ids = (os.getpid(), threading.get_native_id())

    def open(self, category: str, name: str) -> None:
        self._open.append((category, name, time.perf_counter_ns()))

    def close(self) -> None:
        end = time.perf_counter_ns()
        category, name, start = self._open.pop()
        self.events.append({"ph": "X", "cat": category, "name": name,
                            "ts": round(start / 1000.0, 3), "dur": round((end - start) / 1000.0, 3),
                            "pid": self._ids[0], "tid": self._ids[1]})


class _ProfiledSpans(_Spans):
    """Spans recorded by torch.profiler (record_function), on the profiler's clock."""

    def __init__(self) -> None:
        self._open: list[Any] = []

    def open(self, category: str, name: str) -> None:
        recorder = torch.profiler.record_function(span_label(category, name))
        recorder.__enter__()
        self._open.append(recorder)

    def close(self) -> None:
        self._open.pop().__exit__(None, None, None)


class Tracer:
    """Records the traced pass of one process and writes its trace (rank 0)."""

    def __init__(self, options: TraceOptions, device: torch.device, records: bool,
                 meta: dict[str, Any]) -> None:
        self.options = options
        self.device = device
        self.records = records
        self.meta = meta
        self.spans: _Spans = _Spans()
        self.model: nn.Module | None = None
        self.step: Callable[[torch.Tensor, torch.Tensor], object] | None = None
        #: The span name of the model itself (its modules keep their own dotted names).
        self.root = str(meta.get("model") or "model")

    # -- what make_step hands over ------------------------------------------------------------
    def attach(self, model: nn.Module | None, step: Callable[[torch.Tensor, torch.Tensor],
                                                             object]) -> None:
        """The traced step (with phases), and the eager model whose modules get layer spans."""
        self.model = model
        self.step = step

    def phase(self, name: str) -> contextlib.AbstractContextManager:
        """A span of one part of a step (the steps call this; a no-op outside the pass)."""
        return self.spans.span(PHASE, name, self._sync)

    # -- the pass -------------------------------------------------------------------------------
    def run(self, next_batch: Callable[[], Batch], fallback_step: Callable[..., object]) -> dict:
        """Trace --trace_batches batches; the protocol keys to print (rank 0)."""
        try:
            return self._run(next_batch, self.step or fallback_step)
        finally:
            # The traced step holds this tracer (its phases) and the model: let go of both, so
            # that the model (and DDP's reducer) goes before the process group, not at exit.
            self.step = None
            self.model = None

    def _run(self, next_batch: Callable[[], Batch], step: Callable[..., object]) -> dict:
        if not self.records:
            # As many steps as rank 0 runs (the profiler's left-out first batch included): under
            # DDP each step's collectives need every rank.
            for _ in range(self.options.batches + self._profiler_warmup()):
                self._one_step(next_batch, step)
            self._sync()
            return {}
        layer_spans = self.options.at_least("layer") and self.model is not None
        path = os.path.abspath(self.options.file)
        self._sync()
        try:
            if self.options.at_least("operator"):
                events = self._profiled(next_batch, step, layer_spans)
            else:
                events = self._timed(next_batch, step, layer_spans)
            layers = _layer_info(self.model, self.root) if layer_spans else {}
            events = trace_file.finish_events(events, layers)
            meta = {**self.meta, "trace_level": self.options.level,
                    "trace_batches": self.options.batches, "layer_spans": layer_spans}
            trace_file.write_trace(path, meta, events)
        except OSError as error:  # the timed results stand; the trace says why it is missing
            return {"results.trace_error": f"cannot write the trace {path}: "
                                           f"{error.strerror or error}"}
        return {"results.trace_file": path}

    def _one_step(self, next_batch: Callable[[], Batch], step: Callable[..., object]) -> None:
        with self.spans.span(STEP, "step", self._sync):
            with self.spans.span(PHASE, "data_wait", _nothing):
                inputs, labels = next_batch()
            step(inputs, labels)

    def _timed(self, next_batch: Callable[[], Batch], step: Callable[..., object],
               layer_spans: bool) -> list[dict[str, Any]]:
        spans = _TimedSpans()
        with self._recording(spans, layer_spans):
            for _ in range(self.options.batches):
                self._one_step(next_batch, step)
        return spans.events

    def _profiled(self, next_batch: Callable[[], Batch], step: Callable[..., object],
                  layer_spans: bool) -> list[dict[str, Any]]:
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU]
        if self.options.at_least("kernel") and self.device.type == "cuda":
            activities.append(ProfilerActivity.CUDA)
        full = self.options.at_least("full")
        # One profiled batch is left out first: the profiler's own start-up (CUPTI's, on a
        # GPU) is not a batch's time.
        plan = schedule(wait=0, warmup=self._profiler_warmup(), active=self.options.batches,
                        repeat=1)
        with self._recording(_ProfiledSpans(), layer_spans), \
                profile(activities=activities, schedule=plan, record_shapes=full,
                        profile_memory=full, with_stack=full) as profiler:
            for _ in range(self.options.batches + self._profiler_warmup()):
                self._one_step(next_batch, step)
                profiler.step()
        folder = os.path.dirname(os.path.abspath(self.options.file))
        os.makedirs(folder, exist_ok=True)
        handle, exported = tempfile.mkstemp(prefix=".torch_trace.", suffix=".json", dir=folder)
        os.close(handle)
        try:
            profiler.export_chrome_trace(exported)
            with open(exported, encoding="utf-8") as stream:
                document = json.load(stream)
        finally:
            os.unlink(exported)
        events = document.get("traceEvents", []) if isinstance(document, dict) else document
        self.meta.setdefault("device_properties", document.get("deviceProperties", [])
                             if isinstance(document, dict) else [])
        return events

    def _profiler_warmup(self) -> int:
        """Batches the profiler runs before those it records (0 without the profiler)."""
        return 1 if self.options.at_least("operator") else 0

    @contextlib.contextmanager
    def _recording(self, spans: _Spans, layer_spans: bool) -> Iterator[None]:
        """`spans` records, and the model's modules open and close layer spans, meanwhile."""
        self.spans = spans
        handles = _add_layer_hooks(self.model, self.root, spans, self._sync) \
            if layer_spans else []
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()
            self.spans = _Spans()

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _nothing() -> None:
    """A data wait needs no synchronize: its copy, if any, belongs to the step."""


def _layer_names(model: nn.Module, root: str) -> Iterator[tuple[str, nn.Module]]:
    """(span name, module): the model's own dotted names; the model itself is `root`."""
    for path, module in model.named_modules():
        yield path or root, module


def _layer_info(model: nn.Module | None, root: str) -> dict[str, dict[str, str]]:
    if model is None:
        return {}
    return {name: {"type": type(module).__name__, "path": name}
            for name, module in _layer_names(model, root)}


def _add_layer_hooks(model: nn.Module | None, root: str, spans: _Spans,
                     sync: Callable[[], None]) -> list[Any]:
    """A forward pre-hook that opens each module's span and a forward hook that closes it."""
    if model is None:
        return []
    handles = []
    for name, module in _layer_names(model, root):

        def opened(module: nn.Module, inputs: Any, name: str = name) -> None:
            spans.open(LAYER, name)

        def closed(module: nn.Module, inputs: Any, output: Any) -> None:
            sync()
            spans.close()

        handles.append(module.register_forward_pre_hook(opened))
        handles.append(module.register_forward_hook(closed, always_call=True))
    return handles


def in_phase(step: Callable[[torch.Tensor, torch.Tensor], object], name: str,
             tracer: Tracer) -> Callable[[torch.Tensor, torch.Tensor], object]:
    """`step` as one phase (an inference step is all forward)."""

    def traced(inputs: torch.Tensor, labels: torch.Tensor) -> object:
        with tracer.phase(name):
            return step(inputs, labels)

    return traced


def make_tracer(opts: Any, model_id: str, model_title: str, device: torch.device,
                is_main: bool, world_size: int) -> Tracer | None:
    """The tracer the options ask for (None: --trace_level none)."""
    if not opts.trace.enabled:
        return None
    meta = {"framework": "pytorch", "framework_ver": torch.__version__, "model": model_id,
            "model_title": model_title, "phase": opts.phase, "device": device.type,
            "dtype": opts.dtype, "batch_size": opts.batch_size, "world_size": world_size,
            "compile": opts.compile, "cuda_graphs": opts.cuda_graphs}
    return Tracer(opts.trace, device, is_main, meta)


def eager_model(module: nn.Module, compiled: bool) -> nn.Module | None:
    """The module whose submodules get layer spans (DDP's inner module), if any.

    A compiled model or a CUDA graph runs as one call: there is nothing to hook, and hooks
    would make torch.compile recompile.
    """
    if compiled:
        return None
    inner = getattr(module, "module", None)
    return inner if isinstance(inner, nn.Module) else module
