"""The views of `dlbs trace` on traces written by hand: what each table says, exactly."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlbs.traces.compare import compare
from dlbs.traces.reader import TraceError, TraceFile
from dlbs.traces.views import OUTSIDE_LAYERS, ViewError, view
from tests.tracing.conftest import span, write_trace

STEP, PHASE, LAYER = "dlbs.step", "dlbs.phase", "dlbs.layer"


def layer(name: str, ts: float, dur: float, parent: str, depth: int, **args) -> dict:
    return span(LAYER, name, ts, dur, parent=parent, depth=depth, **args)


def two_steps() -> list[dict]:
    """Two steps of 100 us: data wait, forward (with layers), backward, optimizer."""
    events = []
    for batch, start in enumerate((0.0, 100.0)):
        events += [
            span(STEP, "step", start, 100.0, batch=batch),
            span(PHASE, "data_wait", start, 5.0, batch=batch),
            span(PHASE, "forward", start + 5, 45.0, batch=batch),
            span(PHASE, "backward", start + 50, 30.0, batch=batch),
            span(PHASE, "optimizer", start + 80, 10.0, batch=batch),
            layer("net", start + 6, 40.0, "", 0, type="Net"),
            layer("a", start + 6, 15.0, "net", 1, type="Conv"),
            layer("b", start + 21, 20.0 + batch * 4, "net", 1, type="Block"),
            layer("b.x", start + 22, 8.0, "b", 2, type="Conv"),
            span("cpu_op", "aten::conv2d", start + 7, 10.0),
        ]
    return events


@pytest.fixture
def trace(trace_of):
    return TraceFile(trace_of(two_steps(), meta={"trace_level": "operator"}))


def rows_by(table, key):
    return {row[key]: row for row in table.rows}


def test_summary_splits_the_steps(trace):
    table = view("summary", trace)
    assert table.steps == 2
    rows = rows_by(table, "category")
    assert rows["data_wait"]["total_ms"] == pytest.approx(0.010)
    assert rows["compute"]["total_ms"] == pytest.approx(0.150)
    assert rows["  forward"]["per_step_ms"] == pytest.approx(0.045)
    assert rows["optimizer"]["share"] == pytest.approx(0.1)
    assert rows["other"]["total_ms"] == pytest.approx(0.020)
    assert "device_idle" not in rows  # no kernels: nothing to say about the device


def test_layers_per_call_statistics(trace):
    rows = rows_by(view("layers", trace), "layer")
    assert list(rows) == ["net", "b", "a", "b.x", OUTSIDE_LAYERS]  # by total time; the rest
    assert rows["b"]["calls"] == 2
    assert rows["b"]["mean_ms"] == pytest.approx(0.022)
    assert rows["b"]["p50_ms"] == pytest.approx(0.022)
    assert rows["b"]["p99_ms"] == pytest.approx(0.02396)
    assert rows["net"]["share"] == pytest.approx(80 / 200)
    assert rows["a"]["type"] == "Conv" and rows["b.x"]["depth"] == 2
    assert [row["layer"] for row in view("layers", trace, sort="count", top=1).rows] == [
        "a", OUTSIDE_LAYERS]


def test_layers_self_time_and_shares_that_add_to_all_of_the_steps(trace):
    table = view("layers", trace)
    rows = rows_by(table, "layer")
    # net (40 us a step) holds a (15) and b (20, 24), b holds b.x (8).
    assert rows["net"]["self_ms"] == pytest.approx((80 - 30 - 44) / 1000)
    assert rows["b"]["self_ms"] == pytest.approx((44 - 16) / 1000)
    assert rows["b.x"]["self_ms"] == rows["b.x"]["total_ms"]
    # Inclusive shares count a nested layer in each enclosing one.
    assert sum(row["share"] for row in table.rows if row["layer"] != OUTSIDE_LAYERS) \
        == pytest.approx((80 + 30 + 44 + 16) / 200)
    assert sum(row["self_share"] for row in table.rows) == pytest.approx(1.0)
    outside = rows[OUTSIDE_LAYERS]
    assert outside["self_ms"] == pytest.approx((200 - 80) / 1000) and outside["calls"] is None
    assert "adds to 100%" in table.notes[0]
    by_self = [row["layer"] for row in view("layers", trace, sort="self").rows]
    assert by_self == ["a", "b", "b.x", "net", OUTSIDE_LAYERS]
    tree = [row["layer"] for row in view("layer_tree", trace, sort="self").rows]
    assert tree == ["net", "a", "b", "b.x"]  # the hierarchy, each level by self time


def test_layer_tree_inclusive_and_exclusive(trace):
    table = view("layer_tree", trace)
    assert [(row["layer"], row["depth"]) for row in table.rows] == [
        ("net", 0), ("a", 1), ("b", 1), ("b.x", 2)]  # the model's order
    rows = rows_by(table, "layer")
    assert rows["net"]["exclusive_ms"] == pytest.approx(0.080 - 0.030 - 0.044)
    assert rows["b"]["exclusive_ms"] == pytest.approx(0.044 - 0.016)
    assert rows["b.x"]["exclusive_ms"] == rows["b.x"]["inclusive_ms"]
    by_total = view("layer_tree", trace, sort="total")
    assert [row["layer"] for row in by_total.rows] == ["net", "b", "b.x", "a"]


def test_duration_lists_each_batch(trace):
    table = view("duration", trace)
    assert [row["batch"] for row in table.rows] == [0, 1]
    assert table.rows[1]["start_ms"] == pytest.approx(0.1)
    assert table.rows[0]["backward_ms"] == pytest.approx(0.03)
    assert table.rows[0]["other_ms"] == pytest.approx(0.01)


def test_eventflow_is_in_time_order_and_bounded(trace):
    table = view("eventflow", trace, top=3)
    assert [row["name"] for row in table.rows] == ["step", "data_wait", "forward"]
    assert "the first 3 of 20 events" in table.notes[0]
    everything = view("eventflow", trace, top=0)
    assert len(everything.rows) == 20 and not everything.notes
    starts = [row["start_ms"] for row in everything.rows]
    assert starts == sorted(starts)


def test_kernels_per_layer(trace_of):
    events = two_steps() + [
        span("kernel", "implicit_gemm", 8.0, 6.0, tid=7, **{"dlbs.layer": "a",
             "dlbs.operator": "aten::cudnn_convolution", "dlbs.phase": "forward"}),
        span("kernel", "implicit_gemm", 108.0, 4.0, tid=7, **{"dlbs.layer": "a",
             "dlbs.operator": "aten::cudnn_convolution", "dlbs.phase": "forward"}),
        span("gpu_memcpy", "Memcpy HtoD", 1.0, 2.0, tid=8),
        span("kernel", "wgrad", 60.0, 5.0, tid=7, **{"dlbs.layer": "a",
             "dlbs.phase": "backward"}),
    ]
    trace = TraceFile(trace_of(events))
    table = view("kernels", trace)
    rows = {(row["layer"], row["kernel"]): row for row in table.rows}
    gemm = rows[("a", "implicit_gemm")]
    assert gemm["launches"] == 2 and gemm["total_ms"] == pytest.approx(0.010)
    assert gemm["per_step_ms"] == pytest.approx(0.005)
    assert gemm["operators"] == "aten::cudnn_convolution" and gemm["phase"] == "forward"
    assert rows[("", "Memcpy HtoD")]["kind"] == "memcpy"
    assert table.rows[0]["kernel"] == "implicit_gemm"  # by total time
    summary = rows_by(view("summary", trace), "category")
    # The device was busy 2 + 6 + 5 us in step 0 and 4 us in step 1.
    assert summary["device_busy"]["total_ms"] == pytest.approx(0.017)
    assert summary["device_idle"]["total_ms"] == pytest.approx(0.183)


def test_no_kernels_is_said(trace):
    table = view("kernels", trace)
    assert not table.rows and "no kernels traced" in table.notes[0]


def test_communication_from_collectives_when_no_phase_names_it(trace_of):
    events = two_steps() + [span("cpu_op", "gloo:all_reduce", 55.0, 10.0)]
    rows = rows_by(view("summary", TraceFile(trace_of(events))), "category")
    assert rows["communication"]["total_ms"] == pytest.approx(0.010)


def test_begin_end_pairs_are_spans(trace_of):
    events = [
        {"ph": "B", "cat": STEP, "name": "step", "ts": 0, "pid": 1, "tid": 1},
        {"ph": "B", "cat": PHASE, "name": "forward", "ts": 10, "pid": 1, "tid": 1},
        {"ph": "E", "ts": 30, "pid": 1, "tid": 1},
        {"ph": "E", "ts": 50, "pid": 1, "tid": 1},
        {"ph": "E", "ts": 60, "pid": 1, "tid": 2},  # no B on that thread: ignored
        {"ph": "i", "name": "mark", "ts": 5, "pid": 1, "tid": 1},
    ]
    table = view("duration", TraceFile(trace_of(events, array=True, compressed=False)))
    assert table.rows[0]["step_ms"] == pytest.approx(0.05)
    assert table.rows[0]["forward_ms"] == pytest.approx(0.02)


def test_torch_profiler_steps_count_when_dlbs_wrote_none(trace_of):
    events = [span("user_annotation", "ProfilerStep#4", 0.0, 40.0),
              span("user_annotation", "ProfilerStep#5", 40.0, 60.0),
              span("cpu_op", "aten::mm", 1.0, 2.0)]
    table = view("duration", TraceFile(trace_of(events)))
    assert [row["step_ms"] for row in table.rows] == pytest.approx([0.04, 0.06])


def test_a_foreign_trace_gets_notes_not_errors(trace_of):
    trace = TraceFile(trace_of([span("cpu_op", "aten::mm", 1.0, 2.0)]))
    assert trace.metadata() == {}
    assert "no step spans" in view("summary", trace).notes[0]
    assert view("layers", trace).notes == ["no layer spans in this trace"]
    assert view("operators", trace).rows[0]["operator"] == "aten::mm"


def test_metadata_is_read_without_the_events(trace_of):
    meta = {"trace_level": "layer", "nested": {"list": [1, {"a": None}]}, "n": 5}
    assert TraceFile(trace_of(two_steps(), meta=meta)).metadata() == meta


def test_compare_puts_two_traces_side_by_side(trace_of):
    faster = [dict(event, dur=event["dur"] / 2) if event["cat"] == LAYER and
              event["name"] == "b" else event for event in two_steps()]
    faster.append(layer("c", 0.0, 1.0, "net", 1))
    first = view("layers", TraceFile(trace_of(two_steps())))
    second = view("layers", TraceFile(trace_of(faster)))
    table = compare(first, second)
    assert table.columns == ["layer", "a_mean_ms", "b_mean_ms", "ratio"]
    rows = rows_by(table, "layer")
    assert rows["b"]["ratio"] == pytest.approx(0.5)
    assert rows["a"]["ratio"] == pytest.approx(1.0)
    assert rows["c"]["a_mean_ms"] is None and rows["c"]["ratio"] is None
    with pytest.raises(ViewError, match="compare in the"):
        compare(view("eventflow", TraceFile(trace_of(two_steps()))),
                view("eventflow", TraceFile(trace_of(two_steps()))))


@pytest.mark.parametrize("name", ["summary", "eventflow", "duration"])
def test_sort_belongs_to_the_ranked_views(trace, name):
    with pytest.raises(ViewError, match="--sort applies to"):
        view(name, trace, sort="total")


# -- properties -----------------------------------------------------------------------------
intervals = st.lists(st.tuples(st.integers(0, 199), st.integers(1, 60)), max_size=25)


@given(kernels=intervals)
def test_device_busy_is_the_union_of_kernels_inside_steps(tmp_path_factory, kernels):
    """Busy time, against a count of the microseconds some kernel covers inside a step."""
    steps = [(0, 100), (120, 50)]
    events = [span(STEP, "step", start, length) for start, length in steps]
    events += [span("kernel", "k", start, length, tid=7) for start, length in kernels]
    path = write_trace(tmp_path_factory.mktemp("busy") / "t.json.gz", events)
    covered = {us for start, length in kernels for us in range(start, start + length)
               if any(s <= us < s + n for s, n in steps)}
    rows = rows_by(view("summary", TraceFile(path)), "category")
    if not kernels:
        assert "device_busy" not in rows
    else:
        assert rows["device_busy"]["total_ms"] == pytest.approx(len(covered) / 1000.0)
        assert rows["device_idle"]["total_ms"] == pytest.approx(0.150 - len(covered) / 1000)


@st.composite
def layer_trees(draw):
    """Nested layer spans: each child lies inside its parent, siblings one after another."""
    events = []

    def grow(name, start, length, parent, depth):
        events.append(layer(name, start, length, parent, depth))
        if depth >= 3:
            return
        at = start
        for index in range(draw(st.integers(0, 3))):
            room = start + length - at
            if room <= 1:
                break
            child = draw(st.integers(1, int(room)))
            grow(f"{name}.{index}", at, child, name, depth + 1)
            at += child
    for batch in range(draw(st.integers(1, 3))):
        start = batch * 1000.0
        events.append(span(STEP, "step", start, 1000.0))
        grow("m", start + 1, draw(st.integers(1, 998)), "", 0)
    return events


@given(events=layer_trees())
def test_tree_totals_are_the_spans_and_children_never_exceed_parents(tmp_path_factory,
                                                                     events):
    path = write_trace(tmp_path_factory.mktemp("tree") / "t.json.gz", events)
    trace = TraceFile(path)
    tree = rows_by(view("layer_tree", trace), "layer")
    layers = rows_by(view("layers", trace), "layer")
    totals: dict[str, float] = {}
    for event in events:
        if event["cat"] == LAYER:
            totals[event["name"]] = totals.get(event["name"], 0.0) + event["dur"] / 1000
    assert set(tree) == set(layers) - {OUTSIDE_LAYERS} == set(totals)
    assert math.isclose(sum(row["self_share"] for row in layers.values()), 1.0, abs_tol=1e-9)
    for name, total in totals.items():
        assert math.isclose(layers[name]["total_ms"], total, abs_tol=1e-9)
        children = [child for child in totals if child.rpartition(".")[0] == name]
        assert sum(tree[child]["inclusive_ms"] for child in children) <= \
            tree[name]["inclusive_ms"] + 1e-9
        assert math.isclose(tree[name]["exclusive_ms"], tree[name]["inclusive_ms"] - sum(
            tree[child]["inclusive_ms"] for child in children), abs_tol=1e-9)


# -- spans that are not spans of time ---------------------------------------------------------
BAD_SPANS = {
    "negative dur": span(PHASE, "forward", 10.0, -40.0, batch=0),
    "end before begin": [{"ph": "B", "cat": PHASE, "name": "forward", "ts": 60.0, "pid": 1,
                          "tid": 1}, {"ph": "E", "ts": 20.0, "pid": 1, "tid": 1}],
    "a huge negative dur": span(STEP, "step", 500.0, -1e300, batch=9),
    "a negative layer": layer("a", 7.0, -15.0, "net", 1, type="Conv"),
    "a negative operator": span("cpu_op", "aten::conv2d", 7.0, -0.5),
    "a negative kernel": span("kernel", "sgemm", 8.0, -3.0),
}


@pytest.mark.parametrize("bad", list(BAD_SPANS))
@pytest.mark.parametrize("name", ["summary", "layers", "operators", "kernels", "eventflow",
                                  "duration", "layer_tree"])
def test_a_span_that_is_no_span_of_time_is_left_out_with_a_note(trace_of, bad, name):
    extra = BAD_SPANS[bad]
    events = two_steps() + (extra if isinstance(extra, list) else [extra])
    damaged = TraceFile(trace_of(events, meta={"trace_level": "operator"}))
    clean = TraceFile(trace_of(two_steps(), meta={"trace_level": "operator"}))
    table, expected = view(name, damaged), view(name, clean)
    # The numbers are those of the trace without it ...
    assert table.rows == expected.rows and table.steps == expected.steps
    # ... and a note says what was left out.
    [note] = [n for n in table.notes if n not in expected.notes]
    assert note.startswith("1 event(s) left out: a negative or non-finite duration or time "
                           "(the first: event #")
    assert note.endswith("the trace is damaged, or its clocks disagree")
    assert damaged.left_out == 1


def test_the_left_out_spans_are_counted_anew_at_each_reading(trace_of):
    events = two_steps() + [span(PHASE, "forward", 10.0, -1.0), span(PHASE, "x", 1.0, -2.0)]
    trace = TraceFile(trace_of(events))
    assert len(list(trace.spans())) == len(two_steps()) and trace.left_out == 2
    assert trace.first_left_out == "event #20 ('forward'): ts 10, dur -1"
    assert len(list(trace.spans())) == len(two_steps()) and trace.left_out == 2


def test_a_zero_duration_is_a_span(trace_of):
    trace = TraceFile(trace_of(two_steps() + [span(PHASE, "forward", 10.0, 0.0)]))
    assert len(list(trace.spans())) == len(two_steps()) + 1 and trace.left_out == 0


@pytest.mark.parametrize("number", [b"1e999", b"-1e999", b"Infinity", b"NaN"])
def test_a_time_json_cannot_hold_is_refused(tmp_path, number):
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": ' + number
                     + b"}]}")
    with pytest.raises(TraceError, match="is not a valid Chrome trace: malformed JSON"):
        list(TraceFile(path).spans())
