"""The tables of `dlbs trace`, each computed from streaming passes over one trace.

Every view reads the trace's spans one at a time and keeps aggregates: per name, per layer,
per kernel, per step. So memory grows with the number of distinct names and traced batches,
not with the file's size. Three exceptions, said where they are: `layers` keeps each layer
call's time (for its percentiles), the summary of a kernel trace keeps each kernel's start
and end (16 bytes) to measure how long the device was busy, and `operators` keeps each
operator call's start, duration and name (20 bytes) to take its nested operators' time out.

Times in a table are milliseconds (the trace's microseconds / 1000); a share is a fraction
of the traced steps' total time. Definitions: docs/tracing.md ("Views").
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlbs.errors import DlbsError
from dlbs.traces.events import (
    INPUT_SHAPES_ARG,
    KERNEL_CATEGORIES,
    KERNEL_LAYER_ARG,
    KERNEL_OPERATOR_ARG,
    KERNEL_PHASE_ARG,
    LAYER,
    OPERATOR_CATEGORIES,
    PHASE,
    PHASES,
    Span,
    is_communication,
    is_step,
)
from dlbs.traces.reader import TraceFile

VIEWS = ("summary", "layers", "layer_tree", "operators", "kernels", "eventflow", "duration")
SORTS = ("total", "self", "mean", "count")
#: What `eventflow` lists when no --top is given (0 lists every event).
EVENTFLOW_DEFAULT_TOP = 1000
US_PER_MS = 1000.0
#: The `layers` row of the step time that no layer span covers (backward, optimizer, ...).
OUTSIDE_LAYERS = "(outside layers)"
#: The input shapes an `operators` row lists (its most called ones).
SHAPES_LISTED = 3


class ViewError(DlbsError):
    """A view asked of a trace in a way it cannot answer (a bad --sort, say)."""


@dataclass
class Table:
    """One view's result: rows of named columns, and what a comparison matches and compares.

    `key` names the columns that identify a row across two traces; `value` the column two
    traces' rows are compared on (a per-step or per-call time, so traces of different
    lengths compare). `notes` say what a reader of the table must know.
    """

    view: str
    columns: list[str]
    key: list[str]
    value: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    steps: int = 0


@dataclass
class _Steps:
    """The traced steps' windows, sorted by start."""

    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    #: The durations as written: `end - start` loses precision at epoch-sized timestamps.
    durations: list[float] = field(default_factory=list)

    def add(self, span: Span) -> None:
        index = bisect.bisect(self.starts, span.ts)
        self.starts.insert(index, span.ts)
        self.ends.insert(index, span.end)
        self.durations.insert(index, span.dur)

    @property
    def count(self) -> int:
        return len(self.starts)

    @property
    def total(self) -> float:
        return sum(self.durations)

    def index_of(self, ts: float) -> int | None:
        """The step whose window holds `ts`, if any."""
        index = bisect.bisect_right(self.starts, ts) - 1
        if index >= 0 and ts <= self.ends[index]:
            return index
        return None


#: What a view that lists its rows in a fixed order says to --sort.
RANKED_ONLY = "--sort applies to the layers, layer_tree, operators and kernels views"


def _ms(microseconds: float) -> float:
    return microseconds / US_PER_MS


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def _sorted_rows(rows: list[dict[str, Any]], sort: str | None, columns: dict[str, str],
                 default: str, view: str) -> list[dict[str, Any]]:
    if sort is not None and sort not in columns:
        raise ViewError(f"--sort {sort}: the {view} view sorts by {', '.join(columns)}")
    column = columns[sort or default]
    return sorted(rows, key=lambda row: (-(row[column] or 0), str(row.get("name", ""))))


def _top(rows: list[dict[str, Any]], top: int | None) -> list[dict[str, Any]]:
    return rows if not top or top < 0 else rows[:top]


# -- summary ------------------------------------------------------------------------------
def summary(trace: TraceFile, sort: str | None = None, top: int | None = None) -> Table:
    """Where a step's time went: data wait, compute, communication, optimizer, the rest."""
    if sort is not None:
        raise ViewError(RANKED_ONLY)
    steps = _Steps()
    phases = dict.fromkeys(PHASES, 0.0)
    collective_ops = collective_kernels = 0.0
    device = array("d")
    for span in trace.spans():
        if is_step(span):
            steps.add(span)
        elif span.cat == PHASE and span.name in phases:
            phases[span.name] += span.dur
        elif span.cat in KERNEL_CATEGORIES:
            device.append(span.ts)
            device.append(span.end)
            if is_communication(span):
                collective_kernels += span.dur
        elif is_communication(span):
            collective_ops += span.dur
    table = Table("summary", ["category", "total_ms", "per_step_ms", "share"], ["category"],
                  "per_step_ms", steps=steps.count)
    if not steps.count:
        table.notes.append("no step spans in this trace (not written by dlbs?)")
        return table
    whole = steps.total
    communication = phases["communication"]
    if communication:
        phase_communication = communication
    else:
        phase_communication = 0.0
        communication = collective_kernels or collective_ops
        if communication:
            table.notes.append("communication: the collectives' own time, which overlaps "
                               "backward (DDP), so the shares may add to more than 100%")
    compute = phases["forward"] + phases["backward"]
    accounted = phases["data_wait"] + compute + phases["optimizer"] + phase_communication
    rows = [("data_wait", phases["data_wait"]), ("compute", compute),
            ("  forward", phases["forward"]), ("  backward", phases["backward"]),
            ("communication", communication), ("optimizer", phases["optimizer"]),
            ("other", max(0.0, whole - accounted))]
    if len(device):
        busy = _busy_time(device, steps)
        rows += [("device_busy", busy), ("device_idle", max(0.0, whole - busy))]
    for name, total in rows:
        table.rows.append({"category": name, "total_ms": _ms(total),
                           "per_step_ms": _ms(total) / steps.count,
                           "share": _share(total, whole)})
    if not any(phases.values()):
        table.notes.append("no phase spans: this trace splits its steps into nothing")
    return table


def _busy_time(intervals: array, steps: _Steps) -> float:
    """How long any kernel or copy ran inside the steps: the union of their intervals."""
    data = np.frombuffer(intervals, dtype=np.float64).reshape(-1, 2)
    order = np.argsort(data[:, 0], kind="stable")
    starts, ends = data[order, 0], data[order, 1]
    reach = np.maximum.accumulate(ends)
    opens = np.ones(len(starts), dtype=bool)
    opens[1:] = starts[1:] > reach[:-1]
    first = np.flatnonzero(opens)
    union_starts, union_ends = starts[first], np.maximum.reduceat(ends, first)
    busy = 0.0
    for step_start, step_end in zip(steps.starts, steps.ends):
        inside = np.clip(union_ends, step_start, step_end) - \
            np.clip(union_starts, step_start, step_end)
        busy += float(inside.sum())
    return busy


# -- layers -------------------------------------------------------------------------------
def layers(trace: TraceFile, sort: str | None = None, top: int | None = None) -> Table:
    """Per layer: calls, mean, median and 99th percentile of a call, total, self and shares.

    `total_ms` is inclusive (a layer's calls, with the layers they call), so its shares add
    to more than 100%; `self_ms` leaves the child layers' time out, and the self shares,
    with the `(outside layers)` row (the step time no layer covers), add to 100%.
    """
    steps = _Steps()
    durations: dict[str, array] = {}
    kinds: dict[str, str] = {}
    depths: dict[str, int] = {}
    children_time: dict[str, float] = {}
    for span in trace.spans():
        if is_step(span):
            steps.add(span)
        elif span.cat == LAYER:
            durations.setdefault(span.name, array("d")).append(span.dur)
            kinds.setdefault(span.name, str(span.args.get("type", "")))
            depth = span.args.get("depth")
            depths.setdefault(span.name, depth if isinstance(depth, int) else 0)
            parent = span.args.get("parent")
            if isinstance(parent, str) and parent and parent != span.name:
                children_time[parent] = children_time.get(parent, 0.0) + span.dur
    table = Table("layers", ["layer", "type", "depth", "calls", "total_ms", "self_ms", "mean_ms",
                             "p50_ms", "p99_ms", "share", "self_share"], ["layer"], "mean_ms",
                  steps=steps.count)
    whole = steps.total
    rows = []
    in_layers = 0.0
    for name, values in durations.items():
        data = np.frombuffer(values, dtype=np.float64)
        total = float(data.sum())
        own = max(0.0, total - children_time.get(name, 0.0))
        in_layers += own
        rows.append({"layer": name, "name": name, "type": kinds[name], "depth": depths[name],
                     "calls": len(data), "total_ms": _ms(total), "self_ms": _ms(own),
                     "mean_ms": _ms(total) / len(data),
                     "p50_ms": _ms(float(np.percentile(data, 50))),
                     "p99_ms": _ms(float(np.percentile(data, 99))),
                     "share": _share(total, whole), "self_share": _share(own, whole)})
    rows = _sorted_rows(rows, sort, {"total": "total_ms", "self": "self_ms", "mean": "mean_ms",
                                     "count": "calls"}, "total", "layers")
    table.rows = _strip_names(_top(rows, top))
    if not durations:
        table.notes.append(_no_layers_note(trace))
    elif whole > 0:
        outside = max(0.0, whole - in_layers)
        table.rows.append({"layer": OUTSIDE_LAYERS, "type": "", "depth": None, "calls": None,
                           "total_ms": _ms(outside), "self_ms": _ms(outside), "mean_ms": None,
                           "p50_ms": None, "p99_ms": None, "share": _share(outside, whole),
                           "self_share": _share(outside, whole)})
        table.notes.append(f"share: of the steps' time, including the layers a layer calls "
                           f"(so they add to more than 100%); self_share leaves those out and, "
                           f"with {OUTSIDE_LAYERS} (backward, optimizer, data wait: the step "
                           f"time no layer span covers), adds to 100%")
    return table


def _no_layers_note(trace: TraceFile) -> str:
    level = trace.metadata().get("trace_level")
    if level in ("none", "step"):
        return f"no layer spans: this trace is at level {level} (layer or above has them)"
    if trace.metadata().get("layer_spans") is False:
        return ("no layer spans: the model ran as a compiled graph (torch.compile, CUDA graphs, "
                "a hybridized MXNet block), which has no per-layer calls to time")
    return "no layer spans in this trace"


def _strip_names(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for row in rows:
        row.pop("name", None)
    return rows


# -- layer_tree ---------------------------------------------------------------------------
def layer_tree(trace: TraceFile, sort: str | None = None, top: int | None = None) -> Table:
    """The module hierarchy: per layer, inclusive time and exclusive time (without children)."""
    steps = _Steps()
    inclusive: dict[str, float] = {}
    calls: dict[str, int] = {}
    children_time: dict[str, float] = {}
    parents: dict[str, dict[str, None]] = {}
    first: dict[str, float] = {}
    for span in trace.spans():
        if is_step(span):
            steps.add(span)
            continue
        if span.cat != LAYER:
            continue
        inclusive[span.name] = inclusive.get(span.name, 0.0) + span.dur
        calls[span.name] = calls.get(span.name, 0) + 1
        first[span.name] = min(first.get(span.name, span.ts), span.ts)
        parent = span.args.get("parent")
        parent = parent if isinstance(parent, str) else ""
        parents.setdefault(span.name, {})[parent] = None
        if parent:
            children_time[parent] = children_time.get(parent, 0.0) + span.dur
    table = Table("layer_tree", ["layer", "depth", "calls", "inclusive_ms", "exclusive_ms",
                                 "per_step_ms", "share"], ["layer"], "per_step_ms",
                  steps=steps.count)
    if not inclusive:
        table.notes.append(_no_layers_note(trace))
        return table
    children: dict[str, list[str]] = {}
    roots = []
    for name, names in parents.items():
        known = [parent for parent in names if parent in inclusive and parent != name]
        if not known:
            roots.append(name)
        for parent in known:
            children.setdefault(parent, []).append(name)
    columns = {"total": lambda n: -inclusive[n],
               "self": lambda n: -(inclusive[n] - children_time.get(n, 0.0)),
               "mean": lambda n: -inclusive[n] / calls[n], "count": lambda n: -calls[n]}
    if sort is not None and sort not in columns:
        raise ViewError(f"--sort {sort}: the layer_tree view sorts by {', '.join(columns)}")
    order: Callable[[str], Any] = columns[sort] if sort else first.__getitem__
    whole = steps.total
    visited: set[str] = set()

    def visit(name: str, depth: int) -> None:
        if name in visited:
            return
        visited.add(name)
        per_step = _ms(inclusive[name]) / steps.count if steps.count else None
        table.rows.append({
            "layer": name, "depth": depth, "calls": calls[name],
            "inclusive_ms": _ms(inclusive[name]),
            "exclusive_ms": _ms(max(0.0, inclusive[name] - children_time.get(name, 0.0))),
            "per_step_ms": per_step, "share": _share(inclusive[name], whole)})
        for child in sorted(children.get(name, []), key=order):
            visit(child, depth + 1)

    for root in sorted(roots, key=order):
        visit(root, 0)
    table.rows = _top(table.rows, top)
    return table


# -- operators ----------------------------------------------------------------------------
def operators(trace: TraceFile, sort: str | None = None, top: int | None = None) -> Table:
    """Per framework operator (`aten::conv2d`): calls, self and total time, input shapes.

    An operator's self time leaves out the operators it calls (`aten::linear` calls
    `aten::addmm`): the spans nested in it on the same thread. Each call's start, duration
    and name are kept (20 bytes) until the file is read, to find what is nested in what.
    """
    steps = _Steps()
    calls: dict[tuple[Any, Any], tuple[array, array, array]] = {}
    names: dict[str, int] = {}
    shapes: dict[str, dict[str, int]] = {}
    for span in trace.spans():
        if is_step(span):
            steps.add(span)
        elif span.cat in OPERATOR_CATEGORIES:
            starts, lengths, ids = calls.setdefault((span.pid, span.tid), (
                array("d"), array("d"), array("i")))
            starts.append(span.ts)
            lengths.append(span.dur)
            ids.append(names.setdefault(span.name, len(names)))
            shape = _input_shapes(span.args.get(INPUT_SHAPES_ARG))
            if shape is not None:
                seen = shapes.setdefault(span.name, {})
                seen[shape] = seen.get(shape, 0) + 1
    table = Table("operators", ["operator", "calls", "self_ms", "total_ms", "mean_ms",
                                "self_per_step_ms", "self_share", "shapes"], ["operator"],
                  "self_per_step_ms", steps=steps.count)
    if not calls:
        table.notes.append(_no_operators_note(trace))
        return table
    count = np.zeros(len(names), dtype=np.int64)
    total = np.zeros(len(names))
    own = np.zeros(len(names))
    for starts, lengths, ids in calls.values():
        ts, dur = np.frombuffer(starts), np.frombuffer(lengths)
        which = np.frombuffer(ids, dtype=np.int32)
        self_time = _self_times(ts, dur)
        np.add.at(count, which, 1)
        np.add.at(total, which, dur)
        np.add.at(own, which, self_time)
    whole = steps.total
    rows = []
    for name, index in names.items():
        listed = sorted(shapes.get(name, {}).items(), key=lambda item: (-item[1], item[0]))
        text = "; ".join(shape for shape, _ in listed[:SHAPES_LISTED])
        if len(listed) > SHAPES_LISTED:
            text += f"; +{len(listed) - SHAPES_LISTED} more"
        rows.append({"operator": name, "name": name, "calls": int(count[index]),
                     "self_ms": _ms(float(own[index])), "total_ms": _ms(float(total[index])),
                     "mean_ms": _ms(float(total[index])) / int(count[index]),
                     "self_per_step_ms": _ms(float(own[index])) / steps.count
                     if steps.count else None,
                     "self_share": _share(float(own[index]), whole), "shapes": text})
    rows = _sorted_rows(rows, sort, {"total": "total_ms", "self": "self_ms", "mean": "mean_ms",
                                     "count": "calls"}, "self", "operators")
    table.rows = _strip_names(_top(rows, top))
    table.notes.append("self_ms: an operator's own time, without the operators it calls "
                       "(total_ms includes them); host time: on a GPU the kernels' device time "
                       "is in the kernels view")
    if len(calls) > 1:
        table.notes.append(f"operators ran on {len(calls)} threads: their self shares may add "
                           f"to more than 100% of the steps")
    if not shapes:
        table.notes.append("no input shapes: they are recorded at exp.trace_level full "
                           "(PyTorch)")
    return table


#: Calls handed to the Python loop of `_self_times` at once (bounds its temporary lists).
SELF_TIME_CHUNK = 1 << 16


def _self_times(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each call's duration less its directly nested calls' (spans of one thread).

    The calls in start order (an enclosing call before the calls it makes, which start with
    it or later): a call is nested in the innermost open call that has not ended by its start.
    """
    order = np.lexsort((-lengths, starts))  # stable: of two equal spans, the first encloses
    nested = np.zeros(len(order))  # by position in `order`
    stack: list[tuple[float, int]] = []  # (end, position) of the open enclosing calls
    for first in range(0, len(order), SELF_TIME_CHUNK):
        chunk = order[first:first + SELF_TIME_CHUNK]
        for position, start, length in zip(range(first, first + len(chunk)),
                                           starts[chunk].tolist(), lengths[chunk].tolist()):
            while stack and stack[-1][0] <= start:
                stack.pop()
            if stack:
                nested[stack[-1][1]] += length
            stack.append((start + length, position))
    own = np.empty(len(order))
    own[order] = lengths[order] - nested
    return np.maximum(own, 0.0)


def _input_shapes(dims: Any) -> str | None:
    """`Input Dims` as text: each tensor's dims joined by x (2x3x224x224), blanks between."""
    if not isinstance(dims, list):
        return None
    tensors = ["x".join(str(d) for d in item) for item in dims
               if isinstance(item, list) and item]
    return " ".join(tensors) if tensors else "-"


def _no_operators_note(trace: TraceFile) -> str:
    level = trace.metadata().get("trace_level")
    if level in ("none", "step", "layer"):
        return (f"no operators: this trace is at level {level} (operator or above has them)")
    return "no operators in this trace (cpu_op or operator events)"


# -- kernels ------------------------------------------------------------------------------
def kernels(trace: TraceFile, sort: str | None = None, top: int | None = None) -> Table:
    """GPU kernels and copies per layer: launches, total and mean device time."""
    steps = _Steps()
    totals: dict[tuple[str, str], list[Any]] = {}
    for span in trace.spans():
        if is_step(span):
            steps.add(span)
        elif span.cat in KERNEL_CATEGORIES:
            layer = str(span.args.get(KERNEL_LAYER_ARG) or "")
            entry = totals.get((layer, span.name))
            if entry is None:
                entry = totals[(layer, span.name)] = [span.cat, 0, 0.0, {}, {}]
            entry[1] += 1
            entry[2] += span.dur
            operator = span.args.get(KERNEL_OPERATOR_ARG)
            if operator and len(entry[3]) < 3:
                entry[3][str(operator)] = None
            phase = span.args.get(KERNEL_PHASE_ARG)
            if phase:
                entry[4][str(phase)] = None
    table = Table("kernels", ["layer", "kernel", "kind", "phase", "launches", "total_ms",
                              "mean_ms", "per_step_ms", "operators"], ["layer", "kernel"],
                  "per_step_ms", steps=steps.count)
    if not totals:
        table.notes.append("no kernels traced (a CPU trace, a level below kernel, or a "
                           "framework whose profiler records no kernels)")
        return table
    rows = []
    for (layer, name), (kind, launches, total, operators, phases) in totals.items():
        rows.append({"layer": layer, "kernel": name, "name": name,
                     "kind": kind.removeprefix("gpu_"), "phase": ",".join(phases),
                     "launches": launches, "total_ms": _ms(total),
                     "mean_ms": _ms(total) / launches,
                     "per_step_ms": _ms(total) / steps.count if steps.count else None,
                     "operators": ", ".join(operators)})
    rows = _sorted_rows(rows, sort, {"total": "total_ms", "mean": "mean_ms",
                                     "count": "launches"}, "total", "kernels")
    table.rows = _strip_names(_top(rows, top))
    return table


# -- eventflow ----------------------------------------------------------------------------
def eventflow(trace: TraceFile, sort: str | None = None, top: int | None = None) -> Table:
    """The events in time order: start (from the trace's first event), duration, name."""
    if sort is not None:
        raise ViewError(RANKED_ONLY)
    limit = EVENTFLOW_DEFAULT_TOP if top is None else top
    heap: list[tuple[float, int, Span]] = []
    earliest = None
    count = 0
    for count, span in enumerate(trace.spans(), start=1):
        earliest = span.ts if earliest is None else min(earliest, span.ts)
        item = (-span.ts, -count, span)
        if limit <= 0 or len(heap) < limit:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)
    table = Table("eventflow", ["start_ms", "dur_ms", "cat", "name", "pid", "tid", "within"],
                  ["start_ms", "name"], "dur_ms")
    ordered = sorted(heap, key=lambda item: (-item[0], -item[1]))
    for _, _, span in ordered:
        table.rows.append({"start_ms": _ms(span.ts - (earliest or 0.0)), "dur_ms": _ms(span.dur),
                           "cat": span.cat, "name": span.name, "pid": span.pid, "tid": span.tid,
                           "within": span.args.get(KERNEL_LAYER_ARG) or span.args.get("parent")
                           or ""})
    if limit > 0 and count > limit:
        table.notes.append(f"the first {limit} of {count} events (--top 0 lists all of them, "
                           "held in memory to be sorted)")
    return table


# -- duration -----------------------------------------------------------------------------
def duration(trace: TraceFile, sort: str | None = None, top: int | None = None) -> Table:
    """Per traced batch: the step and its phases."""
    if sort is not None:
        raise ViewError(RANKED_ONLY)
    steps = _Steps()
    phase_spans: list[tuple[float, str, float]] = []
    for span in trace.spans():
        if is_step(span):
            steps.add(span)
        elif span.cat == PHASE and span.name in PHASES:
            phase_spans.append((span.ts, span.name, span.dur))
    columns = ["batch", "start_ms", "step_ms", *(f"{phase}_ms" for phase in PHASES), "other_ms"]
    table = Table("duration", columns, ["batch"], "step_ms", steps=steps.count)
    if not steps.count:
        table.notes.append("no step spans in this trace (not written by dlbs?)")
        return table
    per_step = [dict.fromkeys(PHASES, 0.0) for _ in range(steps.count)]
    for ts, name, dur in phase_spans:
        index = steps.index_of(ts)
        if index is not None:
            per_step[index][name] += dur
    for index, (start, length) in enumerate(zip(steps.starts, steps.durations)):
        row: dict[str, Any] = {"batch": index, "start_ms": _ms(start - steps.starts[0]),
                               "step_ms": _ms(length)}
        for name, value in per_step[index].items():
            row[f"{name}_ms"] = _ms(value)
        row["other_ms"] = _ms(max(0.0, length - sum(per_step[index].values())))
        table.rows.append(row)
    table.rows = _top(table.rows, top)
    return table


# -- a folder's traces ----------------------------------------------------------------------
#: What `listing` shows of each trace's metadata (written by dlbs; other traces leave it empty).
LISTED_METADATA = ("framework", "model", "phase", "device", "dtype", "batch_size",
                   "trace_level", "trace_batches")


def listing(traces: list[TraceFile]) -> Table:
    """One row per trace (a folder's): its path and what its metadata says it traced."""
    table = Table("traces", ["trace", *LISTED_METADATA], ["trace"], "trace_batches")
    for trace in traces:
        meta = trace.metadata()
        table.rows.append({"trace": trace.path, **{key: meta.get(key) for key in
                                                   LISTED_METADATA}})
    table.notes.append(f"{len(traces)} traces: name one (dlbs trace PATH --view ...) to see "
                       f"its tables, or two to compare them")
    return table


VIEW_FUNCTIONS: dict[str, Callable[..., Table]] = {
    "summary": summary, "layers": layers, "layer_tree": layer_tree, "operators": operators,
    "kernels": kernels, "eventflow": eventflow, "duration": duration,
}


def view(name: str, trace: TraceFile, sort: str | None = None, top: int | None = None) -> Table:
    """The table of view `name` (one of VIEWS)."""
    if name not in VIEW_FUNCTIONS:
        raise ViewError(f"unknown view {name!r}; choose one of {', '.join(VIEWS)}")
    table = VIEW_FUNCTIONS[name](trace, sort=sort, top=top)
    if trace.left_out:
        table.notes.append(f"{trace.left_out} event(s) left out: a negative or non-finite "
                           f"duration or time (the first: {trace.first_left_out}); the trace "
                           "is damaged, or its clocks disagree")
    return table
