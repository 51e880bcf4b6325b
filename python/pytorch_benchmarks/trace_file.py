"""The Chrome trace the traced pass writes (docs/tracing.md "The trace file"); stdlib only.

The traced pass names its own spans `<category>::<name>` (`dlbs.layer::layer1.0.conv1`), the
only label `torch.profiler.record_function` takes. `finish_events` turns those back into the
span's category and name and adds what the views read from a span's `args`:
- every step span its `batch`, every phase and layer span the batch it is in;
- every layer span its `parent` (the enclosing layer span's name, "" at the top), `depth`,
  and the module's `type` and `path`;
- every kernel, copy and memset (`kernel`, `gpu_memcpy`, `gpu_memset`) the layer, operator and
  phase that launched it (`dlbs.layer`, `dlbs.operator`, `dlbs.phase`): the CUDA runtime call
  with the same correlation id gives the host thread and time of the launch; the innermost
  layer and operator spans around it give the layer and operator. A backward kernel has no
  layer span around it: its autograd node's sequence number names the forward operator that
  made it, and that operator's layer is the kernel's.
`write_trace` writes the file: gzip-compressed, the `dlbs` metadata first (so a reader finds
it without reading the events), to a temporary file that is renamed over the target.
"""

from __future__ import annotations

import bisect
from typing import Any

from benchmark_common.chrome_trace import (  # noqa: F401 - the writer and the nesting
    EPSILON_US,
    LAYER,
    PHASE,
    SPAN_CATEGORIES,
    STEP,
    Event,
    is_span,
    nest_spans,
    span_end,
    spans_by_thread,
    write_trace,
)

SEPARATOR = "::"
KERNEL_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")



def span_label(category: str, name: str) -> str:
    """The label a span is recorded under: `<category>::<name>`."""
    return f"{category}{SEPARATOR}{name}"


def _split_label(name: str) -> tuple[str, str] | None:
    category, separator, rest = name.partition(SEPARATOR)
    if separator and category in SPAN_CATEGORIES:
        return category, rest
    return None


def finish_events(events: list[Event], layers: dict[str, dict[str, str]]) -> list[Event]:
    """Relabel dlbs's spans, annotate spans and kernels (module doc); the events to write.

    The profiler schedule's own `ProfilerStep#N` spans go: the step spans say the same.
    """
    events = [event for event in events if not (
        event.get("cat") in ("user_annotation", "gpu_user_annotation")
        and str(event.get("name", "")).startswith("ProfilerStep#"))]
    for event in events:
        label = _split_label(str(event.get("name", "")))
        if label is None:
            continue
        category, name = label
        event["name"] = name
        if event.get("cat") == "user_annotation" or event.get("cat") in SPAN_CATEGORIES:
            event["cat"] = category
        else:  # gpu_user_annotation: the span's extent on the GPU, kept with torch's category
            event.setdefault("args", {})["dlbs.span"] = category
    nest_spans(events, layers)
    if any(event.get("cat") in KERNEL_CATEGORIES for event in events):
        attribute_kernels(events)
    return events


def attribute_kernels(events: list[Event]) -> None:
    """`dlbs.layer`, `dlbs.operator` and `dlbs.phase` of each kernel, copy and memset."""
    phases = sorted((e["ts"], span_end(e), e["name"]) for e in events
                    if is_span(e) and e.get("cat") == PHASE)
    phase_starts = [start for start, _, _ in phases]
    launches: dict[Any, tuple[str, str, float]] = {}
    forward_layers: dict[Any, str] = {}
    host = spans_by_thread(events, lambda e: e.get("cat") in ("cpu_op", LAYER, "cuda_runtime",
                                                       "cuda_driver"))
    deferred: list[tuple[Any, Event | None, float]] = []
    for spans in host.values():
        open_spans: list[Event] = []
        for span in spans:
            while open_spans and span["ts"] >= span_end(open_spans[-1]) - EPSILON_US:
                open_spans.pop()
            layer = next((s["name"] for s in reversed(open_spans) if s.get("cat") == LAYER), "")
            if span.get("cat") == "cpu_op":
                sequence = span.get("args", {}).get("Sequence number")
                if sequence is not None and layer:
                    forward_layers.setdefault(sequence, layer)
            elif span.get("cat") in ("cuda_runtime", "cuda_driver"):
                correlation = span.get("args", {}).get("correlation")
                operator = next((s for s in reversed(open_spans) if s.get("cat") == "cpu_op"),
                                None)
                if correlation is not None and layer:
                    launches[correlation] = (layer, str(operator["name"]) if operator else "",
                                             span["ts"])
                elif correlation is not None:
                    autograd = next((s for s in reversed(open_spans) if s.get("cat") == "cpu_op"
                                     and "Sequence number" in s.get("args", {})), None)
                    deferred.append((correlation, autograd, span["ts"]))
                    launches[correlation] = ("", str(operator["name"]) if operator else "",
                                             span["ts"])
            open_spans.append(span)
    for correlation, autograd, ts in deferred:  # backward: the layer of the forward operator
        if autograd is not None:
            layer = forward_layers.get(autograd["args"]["Sequence number"], "")
            launches[correlation] = (layer, launches[correlation][1], ts)
    for event in events:
        if event.get("cat") not in KERNEL_CATEGORIES:
            continue
        args = event.setdefault("args", {})
        layer, operator, launched = launches.get(args.get("correlation"),
                                                 ("", "", event.get("ts", 0.0)))
        args["dlbs.layer"] = layer
        args["dlbs.operator"] = operator
        index = bisect.bisect_right(phase_starts, launched) - 1
        if index >= 0 and launched <= phases[index][1]:
            args["dlbs.phase"] = phases[index][2]
