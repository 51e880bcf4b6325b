"""Checks of a trace that every backend's tests share, computed without dlbs.traces.

`load` reads a whole trace with the standard library (the test traces are small), so what
the views compute from a stream is checked against an independent reading of the file.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from dlbs.traces.reader import TraceFile
from dlbs.traces.views import OUTSIDE_LAYERS, view

INT64 = 2**63 - 1
#: Timestamps in the file have three decimals of a microsecond.
SLACK_US = 0.01


def load(path: str | Path) -> dict[str, Any]:
    """The trace as one JSON document; checks it is a Chrome trace that Perfetto reads."""
    raw = Path(path).read_bytes()
    assert raw[:2] == b"\x1f\x8b", "a trace is gzip-compressed"
    text = gzip.decompress(raw).decode("utf-8")
    document = json.loads(text, parse_constant=_no_constants)
    assert isinstance(document, dict) and isinstance(document.get("traceEvents"), list)
    assert list(document)[0] == "dlbs", "the metadata comes first"
    for event in document["traceEvents"]:
        assert isinstance(event, dict) and isinstance(event.get("ph"), str), event
        for key in ("pid", "tid"):
            if key in event:
                assert isinstance(event[key], int | str), event
                assert not isinstance(event[key], int) or abs(event[key]) <= INT64, event
        if event["ph"] == "X":
            assert isinstance(event.get("name"), str), event
            assert isinstance(event.get("ts"), int | float) and math.isfinite(event["ts"]), event
            assert isinstance(event.get("dur"), int | float) and event["dur"] >= 0, event
    return document


def _no_constants(name: str) -> None:
    raise AssertionError(f"{name} is not JSON")


def spans(document: dict[str, Any], category: str) -> list[dict[str, Any]]:
    """The complete events of one category."""
    return [e for e in document["traceEvents"] if e.get("ph") == "X" and e.get("cat") == category]


def check_layer_nesting(document: dict[str, Any]) -> None:
    """Each layer span lies inside its parent span, and its children never exceed it."""
    layers = spans(document, "dlbs.layer")
    assert layers, "no layer spans"
    by_thread: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for span in layers:
        by_thread[(span["pid"], span["tid"])].append(span)
    for thread_spans in by_thread.values():
        thread_spans.sort(key=lambda s: (s["ts"], -s["dur"]))
        children: dict[int, float] = defaultdict(float)
        for index, span in enumerate(thread_spans):
            parent = span["args"]["parent"]
            if not parent:
                assert span["args"]["depth"] == 0
                continue
            holders = [i for i, other in enumerate(thread_spans[:index])
                       if other["name"] == parent and other["ts"] <= span["ts"] + SLACK_US
                       and span["ts"] + span["dur"] <= other["ts"] + other["dur"] + SLACK_US]
            assert holders, f"{span['name']} lies in no span of its parent {parent}"
            holder = holders[-1]
            assert thread_spans[holder]["args"]["depth"] == span["args"]["depth"] - 1
            children[holder] += span["dur"]
        for holder, total in children.items():
            assert total <= thread_spans[holder]["dur"] + SLACK_US * 10, \
                f"the children of {thread_spans[holder]['name']} exceed it"


def check_views_agree(path: str | Path, document: dict[str, Any]) -> None:
    """The views' totals are the trace's own spans, summed independently."""
    trace = TraceFile(path)
    steps = spans(document, "dlbs.step")
    step_total_ms = sum(s["dur"] for s in steps) / 1000.0
    summary = view("summary", trace)
    assert summary.steps == len(steps) == document["dlbs"]["trace_batches"]
    rows = {row["category"]: row for row in summary.rows}
    phases = defaultdict(float)
    for span in spans(document, "dlbs.phase"):
        phases[span["name"]] += span["dur"] / 1000.0
    assert math.isclose(rows["data_wait"]["total_ms"], phases["data_wait"], abs_tol=1e-6)
    assert math.isclose(rows["compute"]["total_ms"], phases["forward"] + phases["backward"],
                        abs_tol=1e-6)
    assert math.isclose(rows["optimizer"]["total_ms"], phases["optimizer"], abs_tol=1e-6)
    main = ["data_wait", "compute", "communication", "optimizer", "other"]
    assert math.isclose(sum(rows[name]["total_ms"] for name in main), step_total_ms,
                        rel_tol=1e-9, abs_tol=1e-6)
    duration = view("duration", trace)
    assert [row["batch"] for row in duration.rows] == list(range(len(steps)))
    assert math.isclose(sum(row["step_ms"] for row in duration.rows), step_total_ms,
                        abs_tol=1e-6)
    layer_totals = defaultdict(float)
    calls = defaultdict(int)
    for span in spans(document, "dlbs.layer"):
        layer_totals[span["name"]] += span["dur"] / 1000.0
        calls[span["name"]] += 1
    layers = {row["layer"]: row for row in view("layers", trace).rows}
    if layer_totals:  # self shares, with the step time outside layers, are the whole steps
        assert math.isclose(sum(row["self_share"] for row in layers.values()), 1.0,
                            abs_tol=1e-6)
        assert -1e-6 <= layers.pop(OUTSIDE_LAYERS)["self_ms"] <= step_total_ms + 1e-6
    assert set(layers) == set(layer_totals)
    for name, total in layer_totals.items():
        assert math.isclose(layers[name]["total_ms"], total, rel_tol=1e-9, abs_tol=1e-6)
        assert layers[name]["calls"] == calls[name]
        assert layers[name]["p50_ms"] <= layers[name]["p99_ms"] + 1e-9
        assert -1e-6 <= layers[name]["self_ms"] <= layers[name]["total_ms"] + 1e-6
    tree = view("layer_tree", trace)
    assert {row["layer"] for row in tree.rows} == set(layer_totals)
    for row in tree.rows:
        assert math.isclose(row["inclusive_ms"], layer_totals[row["layer"]], abs_tol=1e-6)
        assert -1e-6 <= row["exclusive_ms"] <= row["inclusive_ms"] + 1e-6
    check_operators(trace, document)
    events = view("eventflow", trace, top=0)
    starts = [row["start_ms"] for row in events.rows]
    assert starts == sorted(starts) and len(events.rows) == sum(
        1 for e in document["traceEvents"] if e.get("ph") == "X")


def check_operators(trace: TraceFile, document: dict[str, Any]) -> None:
    """The operators view: calls and totals are the spans', self times add to the outermost.

    Per thread, the self times of all calls add up to the time of the calls that no other
    call encloses.
    """
    calls = [e for e in document["traceEvents"] if e.get("ph") == "X"
             and e.get("cat") in ("cpu_op", "operator")]
    rows = {row["operator"]: row for row in view("operators", trace, top=0).rows}
    totals: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for call in calls:
        totals[call["name"]] += call["dur"] / 1000.0
        counts[call["name"]] += 1
    assert set(rows) == set(totals)
    for name, total in totals.items():
        assert rows[name]["calls"] == counts[name]
        assert math.isclose(rows[name]["total_ms"], total, rel_tol=1e-9, abs_tol=1e-6)
        assert -1e-6 <= rows[name]["self_ms"] <= total + 1e-6
    outermost = 0.0
    by_thread: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for call in calls:
        by_thread[(call.get("pid"), call.get("tid"))].append(call)
    for thread_calls in by_thread.values():
        reach = -math.inf
        for call in sorted(thread_calls, key=lambda c: (c["ts"], -c["dur"])):
            if call["ts"] >= reach:
                outermost += call["dur"]
                reach = call["ts"] + call["dur"]
    assert math.isclose(sum(row["self_ms"] for row in rows.values()), outermost / 1000.0,
                        rel_tol=1e-6, abs_tol=1e-6)
