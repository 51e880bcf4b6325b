"""The `operators` view: a framework's operators with self time, calls and input shapes.

Traces written by hand, with the nesting PyTorch's profiler records (`aten::linear` calls
`aten::t` and `aten::addmm`), and properties against a brute-force reading of the spans.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlbs.traces.compare import compare
from dlbs.traces.reader import TraceFile
from dlbs.traces.views import view
from tests.tracing.conftest import span, write_trace

STEP = "dlbs.step"


def op(name: str, ts: float, dur: float, tid: int = 1, dims: list | None = None) -> dict:
    """A PyTorch operator event (`cpu_op`), with `Input Dims` when shapes were recorded."""
    return span("cpu_op", name, ts, dur, tid=tid,
                **({"Input Dims": dims} if dims is not None else {}))


def linear_steps(with_shapes: bool = True) -> list[dict]:
    """Two steps of 100 us; in each a linear layer's operators, as torch nests them."""
    events = []
    for start, batch in ((0.0, 8), (100.0, 4)):
        shapes = (lambda dims: dims) if with_shapes else (lambda dims: None)
        events += [
            span(STEP, "step", start, 100.0),
            op("aten::linear", start + 10, 20.0, dims=shapes([[batch, 64], [10, 64], [10]])),
            op("aten::t", start + 11, 2.0, dims=shapes([[10, 64]])),
            op("aten::transpose", start + 11.5, 1.0, dims=shapes([[10, 64], [], []])),
            op("aten::addmm", start + 14, 15.0, dims=shapes([[10], [batch, 64], [64, 10]])),
            # Starts where linear ends: a sibling, not a child.
            op("aten::relu", start + 30, 5.0, dims=shapes([[batch, 10]])),
        ]
    return events


def rows_by(table):
    return {row["operator"]: row for row in table.rows}


def test_self_time_leaves_out_the_operators_called(trace_of):
    table = view("operators", TraceFile(trace_of(linear_steps())))
    rows = rows_by(table)
    assert table.steps == 2 and table.columns == [
        "operator", "calls", "self_ms", "total_ms", "mean_ms", "self_per_step_ms", "self_share",
        "shapes"]
    assert rows["aten::linear"]["calls"] == 2
    assert rows["aten::linear"]["total_ms"] == pytest.approx(0.040)
    assert rows["aten::linear"]["self_ms"] == pytest.approx(2 * (20 - 2 - 15) / 1000)
    assert rows["aten::t"]["self_ms"] == pytest.approx(2 * (2 - 1) / 1000)
    assert rows["aten::transpose"]["self_ms"] == rows["aten::transpose"]["total_ms"]
    assert rows["aten::addmm"]["self_ms"] == pytest.approx(0.030)
    assert rows["aten::relu"]["self_ms"] == pytest.approx(0.010)  # a sibling of linear
    assert rows["aten::addmm"]["self_per_step_ms"] == pytest.approx(0.015)
    assert rows["aten::addmm"]["self_share"] == pytest.approx(30 / 200)
    assert rows["aten::linear"]["mean_ms"] == pytest.approx(0.020)
    # Self time adds up to the time spent in operators: linear's and relu's spans.
    assert sum(row["self_ms"] for row in table.rows) == pytest.approx(2 * (20 + 5) / 1000)
    assert table.rows[0]["operator"] == "aten::addmm"  # by self time


def test_input_shapes_most_called_first(trace_of):
    rows = rows_by(view("operators", TraceFile(trace_of(linear_steps()))))
    assert rows["aten::addmm"]["shapes"] == "10 4x64 64x10; 10 8x64 64x10"
    assert rows["aten::transpose"]["shapes"] == "10x64"  # scalar arguments have no dims
    events = [span(STEP, "step", 0.0, 100.0)]
    events += [op("aten::add", float(i), 0.5, dims=[[i % 5 + 1], []]) for i in range(9)]
    events += [op("aten::add", 50.0, 0.5, dims=[[], []])]
    (row,) = view("operators", TraceFile(trace_of(events))).rows
    assert row["calls"] == 10
    assert row["shapes"] == "1; 2; 3; +3 more"  # two calls each of 1..4, one of 5 and of -


def test_without_shapes_the_view_says_where_they_come_from(trace_of):
    table = view("operators", TraceFile(trace_of(linear_steps(with_shapes=False))))
    assert {row["shapes"] for row in table.rows} == {""}
    assert any("exp.trace_level full" in note for note in table.notes)
    with_shapes = view("operators", TraceFile(trace_of(linear_steps())))
    assert not any("exp.trace_level full" in note for note in with_shapes.notes)


def test_threads_are_apart(trace_of):
    # The same times on another thread (autograd's backward thread on a GPU) nest nothing.
    events = linear_steps() + [op("aten::mm", 10.0, 20.0, tid=2),
                               op("aten::mm_backward", 12.0, 4.0, tid=3)]
    table = view("operators", TraceFile(trace_of(events)))
    rows = rows_by(table)
    assert rows["aten::mm"]["self_ms"] == pytest.approx(0.020)
    assert rows["aten::linear"]["self_ms"] == pytest.approx(0.006)
    assert rows["aten::mm_backward"]["self_ms"] == pytest.approx(0.004)
    assert any("3 threads" in note for note in table.notes)


def test_mxnet_operators_count_and_other_events_do_not(trace_of):
    events = [span(STEP, "step", 0.0, 10.0), span("operator", "Convolution", 1.0, 4.0),
              span("dlbs.layer", "conv0", 0.5, 5.0, parent="", depth=0),
              span("kernel", "implicit_gemm", 1.0, 3.0, tid=7),
              span("python_function", "forward", 0.0, 9.0)]
    (row,) = view("operators", TraceFile(trace_of(events))).rows
    assert row["operator"] == "Convolution" and row["self_ms"] == pytest.approx(0.004)


def test_a_trace_without_operators_says_why(trace_of):
    events = [span(STEP, "step", 0.0, 10.0)]
    at_layer = view("operators", TraceFile(trace_of(events, meta={"trace_level": "layer"})))
    assert not at_layer.rows
    assert at_layer.notes == ["no operators: this trace is at level layer (operator or above "
                              "has them)"]
    assert view("operators", TraceFile(trace_of(events))).notes == [
        "no operators in this trace (cpu_op or operator events)"]


def test_sorting_and_top(trace_of):
    trace = TraceFile(trace_of(linear_steps()))
    assert [r["operator"] for r in view("operators", trace, sort="total").rows][:2] == [
        "aten::linear", "aten::addmm"]
    assert [r["operator"] for r in view("operators", trace, sort="count", top=1).rows] == [
        "aten::addmm"]  # all are called twice: by name
    by_self = [r["operator"] for r in view("operators", trace).rows]
    assert by_self == ["aten::addmm", "aten::relu", "aten::linear", "aten::t",
                       "aten::transpose"]


def test_two_traces_compare_per_step(trace_of):
    faster = [dict(event, dur=event["dur"] / 2) if event["name"] == "aten::addmm" else event
              for event in linear_steps()]
    table = compare(view("operators", TraceFile(trace_of(linear_steps()))),
                    view("operators", TraceFile(trace_of(faster))))
    assert table.columns == ["operator", "a_self_per_step_ms", "b_self_per_step_ms", "ratio"]
    rows = {row["operator"]: row for row in table.rows}
    assert rows["aten::addmm"]["ratio"] == pytest.approx(0.5)
    # linear lost less of its time to addmm: its own time grew by addmm's saving.
    assert rows["aten::linear"]["b_self_per_step_ms"] == pytest.approx((3 + 7.5) / 1000)


# -- properties -----------------------------------------------------------------------------
@st.composite
def nested_calls(draw):
    """Operators of one or two threads, each call inside its caller, siblings apart."""
    events = []

    def grow(start: float, length: float, tid: int, depth: int) -> None:
        events.append(op(f"op{depth}_{draw(st.integers(0, 2))}", start, length, tid=tid))
        if depth >= 3:
            return
        at = start
        for _ in range(draw(st.integers(0, 3))):
            room = start + length - at
            if room < 1:
                break
            gap = draw(st.integers(0, int(room) - 1))
            child = draw(st.integers(1, int(room) - gap))
            grow(at + gap, float(child), tid, depth + 1)
            at += gap + child

    events.append(span(STEP, "step", 0.0, 1000.0))
    for tid in range(1, draw(st.integers(1, 2)) + 1):
        at = 0.0
        for _ in range(draw(st.integers(1, 3))):
            length = float(draw(st.integers(1, 300)))
            grow(at, length, tid, 0)
            at += length + draw(st.integers(0, 10))
    return events


def _brute_force_self(events: list[dict]) -> dict[str, float]:
    """Self time per name: each call less the calls whose smallest enclosing call it is.

    Two calls with the same start and length (a call that does nothing but call another):
    the one written first holds the other, as the profiler writes a caller first.
    """
    calls = [e for e in events if e["cat"] == "cpu_op"]
    own = {index: call["dur"] for index, call in enumerate(calls)}
    for index, call in enumerate(calls):
        holders = [j for j, other in enumerate(calls) if j != index
                   and other["tid"] == call["tid"] and other["ts"] <= call["ts"]
                   and call["ts"] + call["dur"] <= other["ts"] + other["dur"]
                   and (other["dur"] > call["dur"] or j < index)]
        if holders:
            nearest = min(holders, key=lambda j: (calls[j]["dur"], -j))
            own[nearest] -= call["dur"]
    totals: dict[str, float] = {}
    for index, call in enumerate(calls):
        totals[call["name"]] = totals.get(call["name"], 0.0) + own[index]
    return totals


@settings(max_examples=60, deadline=None)
@given(events=nested_calls())
def test_self_times_are_the_calls_less_their_nested_calls(tmp_path_factory, events):
    path = write_trace(tmp_path_factory.mktemp("ops") / "t.json.gz", events)
    rows = {row["operator"]: row for row in view("operators", TraceFile(path)).rows}
    expected = _brute_force_self(events)
    assert set(rows) == set(expected)
    for name, own in expected.items():
        assert math.isclose(rows[name]["self_ms"], own / 1000, abs_tol=1e-9), name
        assert rows[name]["self_ms"] <= rows[name]["total_ms"] + 1e-12
    tops = sum(e["dur"] for e in events if e["cat"] == "cpu_op" and e["name"].startswith("op0_"))
    assert math.isclose(sum(row["self_ms"] for row in rows.values()), tops / 1000,
                        abs_tol=1e-9)
