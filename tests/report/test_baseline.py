"""`dlbs report --baseline KEY=GLOB`: each row's speed-up over its baseline row (issue 12).

Also: a parameter computed from others (a framework's argument list) is not a row key when
those others already tell the experiments apart, and still is when nothing else does.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlbs.errors import ResultsError
from dlbs.report import Options, build_report, render
from dlbs.report.html import render_html
from dlbs.report.select import Filter
from tests.report.conftest import REPO, record, records
from tests.results.helpers_results import experiment, write_log


def timed(model: str, framework: str, batch: int, times: list[float], gpus: int = 1,
          **extra: Any) -> dict[str, Any]:
    """An experiment with per-batch times (its median is what a speed-up divides)."""
    values = experiment(model, gpus, batch, None, exp_id=f"{framework}-{model}-{batch}-{gpus}-"
                        f"{sorted(extra.items())}", **extra)
    values["exp.framework"] = framework
    values["results.time_data"] = times
    return values


def options(*baseline: str, **more: Any) -> Options:
    return Options(baseline=[Filter.parse(text, "--baseline") for text in baseline], **more)


# PyTorch and MXNet, two models, two batches; MXNet's medians are 50 and 20 ms where
# PyTorch's are 100 and 40 ms (resnet50), 300 and 90 ms (vgg16).
TWO_FRAMEWORKS = [
    timed("resnet50", "pytorch", 1, [90.0, 100.0, 130.0]),
    timed("resnet50", "pytorch", 32, [40.0, 40.0, 41.0]),
    timed("vgg16", "pytorch", 1, [300.0, 310.0, 290.0]),
    timed("vgg16", "pytorch", 32, [90.0, 80.0, 100.0]),
    timed("resnet50", "mxnet", 1, [50.0, 45.0, 60.0]),
    timed("resnet50", "mxnet", 32, [20.0, 20.0, 19.0]),
    timed("vgg16", "mxnet", 1, [150.0, 160.0, 140.0]),
    timed("vgg16", "mxnet", 32, [30.0, 31.0, 29.0]),
]


def test_two_frameworks_against_a_pytorch_baseline() -> None:
    report = build_report(records(*TWO_FRAMEWORKS), options("exp.framework=pytorch"))
    # Issue 23: the throughput beside the speedup is the one at the median batch time (it was
    # results.throughput, from the mean: medians divided beside mean throughputs).
    assert [item.key for item in report.metrics] == [
        "results.time_median", "throughput_median", "speedup"]
    found = {(r["model"], r["framework"], r["replica_batch"]): (r["time_median"], r["speedup"])
             for r in report.records()}
    assert found == {
        ("resnet50", "pytorch", 1): (100.0, 1.0), ("resnet50", "pytorch", 32): (40.0, 1.0),
        ("vgg16", "pytorch", 1): (300.0, 1.0), ("vgg16", "pytorch", 32): (90.0, 1.0),
        ("resnet50", "mxnet", 1): (50.0, 2.0), ("resnet50", "mxnet", 32): (20.0, 2.0),
        ("vgg16", "mxnet", 1): (150.0, 2.0), ("vgg16", "mxnet", 32): (30.0, 3.0),
    }
    # The other way round: MXNet is the baseline.
    swapped = build_report(records(*TWO_FRAMEWORKS), options("framework=mxnet"))
    assert {(r["model"], r["framework"], r["replica_batch"]): r["speedup"]
            for r in swapped.records()}[("vgg16", "pytorch", 32)] == 30.0 / 90.0   # was 0.33
    assert report.baseline_compared == ["exp.model", "exp.replica_batch", "exp.effective_batch"]
    assert "a row's baseline has the row's model, replica batch, effective batch." in (
        report.footnotes()[0])


def test_speedup_in_every_format() -> None:
    report = build_report(records(*TWO_FRAMEWORKS),
                          options("exp.framework=pytorch", columns=["time", "speedup"]))
    text = render(report, "text").splitlines()
    header = next(line for line in text if line.startswith("model"))
    assert header.split()[-1] == "speedup"
    vgg_mxnet_32 = next(line for line in text if line.startswith("vgg16") and " mxnet " in line
                        and line.split()[2] == "32")
    # Issue 23: significant digits in text (3.00 before).
    assert vgg_mxnet_32.split()[-1] == "3"
    markdown = render(report, "markdown")
    assert "| speedup |" in markdown and "| 3 |" in markdown
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    assert [row["speedup"] for row in rows if row["framework"] == "mxnet"] == [
        "2.0", "2.0", "2.0", "3.0"]
    document = json.loads(render(report, "json"))
    assert document["baseline"] == ["exp.framework=pytorch"]
    assert [row["speedup"] for row in document["rows"]] == [2.0, 2.0, 1.0, 1.0, 2.0, 3.0,
                                                           1.0, 1.0]
    assert any(note.startswith("speedup: ") for note in document["notes"])
    page = render_html(report)
    assert "<th>speedup</th>" in page.replace(' class="number"', "") and ">3<" in page


def test_columns_speedup_alone_and_where_it_is_refused() -> None:
    items = records(*TWO_FRAMEWORKS)
    report = build_report(items, options("exp.framework=pytorch", columns=["speedup"]))
    assert [item.key for item in report.metrics] == ["speedup"]
    assert len(report.records()) == 8
    # --columns without speedup: --baseline adds it last.
    report = build_report(items, options("exp.framework=pytorch", columns=["throughput"]))
    assert [item.key for item in report.metrics] == ["results.throughput", "speedup"]
    with pytest.raises(ResultsError, match="speedup: only weak and strong reports have it, "
                                           "or a regular report with --baseline"):
        build_report(items, Options(columns=["speedup"]))
    with pytest.raises(ResultsError, match="--baseline compares the rows of a regular report, "
                                           "not of --type weak"):
        build_report(items, options("exp.framework=pytorch", kind="weak"))
    with pytest.raises(ResultsError, match="--baseline exp.framework=tensorflow: no row of "
                                           "the report matches"):
        build_report(items, options("exp.framework=tensorflow"))
    with pytest.raises(ResultsError, match="--baseline 'framework' is not KEY=PATTERN"):
        options("framework")


def test_a_row_without_a_baseline_is_refused() -> None:
    # MXNet also ran batch 64, PyTorch did not.
    items = records(*TWO_FRAMEWORKS, timed("resnet50", "mxnet", 64, [10.0]))
    with pytest.raises(ResultsError) as refused:
        build_report(items, options("exp.framework=pytorch"))
    assert str(refused.value) == (
        "--baseline exp.framework=pytorch: the row (model resnet50, framework mxnet, replica "
        "batch 64, effective batch 64) has no baseline row: the nearest baseline row has "
        "exp.replica_batch 1, not 64, exp.effective_batch 1, not 64")
    assert "(--baseline exp.replica_batch=1 --baseline exp.effective_batch=1)" in (
        refused.value.hint)
    assert "--filter" in refused.value.hint
    # Filtered out, the others compare.
    kept = build_report(items, options("exp.framework=pytorch",
                                       filters=[Filter.parse("exp.replica_batch=[13]*")]))
    assert len(kept.records()) == 8


def test_several_baseline_rows_are_refused_with_the_keys_to_add() -> None:
    # PyTorch eager in two memory formats: which is MXNet's baseline?
    items = [*TWO_FRAMEWORKS[4:],
             *(timed(model, "pytorch", batch, [10.0], **{"pytorch.channels_last": last})
               for model in ("resnet50", "vgg16") for batch in (1, 32) for last in (False, True))]
    with pytest.raises(ResultsError) as refused:
        build_report(records(*items), options("exp.framework=pytorch"))
    assert str(refused.value) == (
        "--baseline exp.framework=pytorch: the row (model resnet50, framework mxnet, replica "
        "batch 1, effective batch 1) has 2 baseline rows, which differ in "
        "pytorch.channels_last (false, true)")
    assert refused.value.hint == (
        "name the baseline's value of those keys too, e.g. --baseline "
        "pytorch.channels_last=false")
    report = build_report(records(*items), options("exp.framework=pytorch",
                                                   "pytorch.channels_last=false"))
    speedups = {(r["framework"], r["pytorch.channels_last"], r["model"], r["replica_batch"]):
                r["speedup"] for r in report.records()}
    assert speedups[("mxnet", None, "resnet50", 1)] == 0.2     # 10 ms against 50 ms
    assert speedups[("pytorch", True, "resnet50", 1)] == 1.0   # 10 ms against 10 ms
    # A key that both rows have is compared: channels-last PyTorch is no baseline of itself.
    # (The configs now compute pytorch.channels_last from the device, hence from the GPUs,
    # as they compute the effective batch: that one follows from the compared keys here.)
    assert report.baseline_compared == ["exp.model", "exp.replica_batch"]


def test_a_configuration_knob_of_the_baselines_framework_must_be_named() -> None:
    # Compiled PyTorch also with freezing: the baseline (compile false) has freezing false,
    # so a frozen compiled row has no baseline until the baseline's freezing is named.
    items = records(
        timed("resnet50", "pytorch", 1, [100.0], **{"pytorch.compile": False,
                                                    "pytorch.freezing": False}),
        timed("resnet50", "pytorch", 1, [80.0], **{"pytorch.compile": True,
                                                   "pytorch.freezing": False}),
        timed("resnet50", "pytorch", 1, [40.0], **{"pytorch.compile": True,
                                                   "pytorch.freezing": True}),
        timed("resnet50", "onnxruntime", 1, [25.0]),
    )
    with pytest.raises(ResultsError, match=r"the nearest baseline row has pytorch.freezing "
                                           r"false, not true") as refused:
        build_report(items, options("exp.framework=pytorch", "pytorch.compile=false"))
    assert "--baseline pytorch.freezing=false" in refused.value.hint
    report = build_report(items, options("exp.framework=pytorch", "pytorch.compile=false",
                                         "pytorch.freezing=false"))
    assert sorted(r["speedup"] for r in report.records()) == [1.0, 1.25, 2.5, 4.0]


def test_keys_that_follow_from_the_baseline_keys_are_not_compared() -> None:
    # --baseline exp.num_gpus=1: the effective batch follows from the GPU count (both are
    # computed from exp.gpus); the replica batch is compared.
    items = records(*(timed(model, "pytorch", batch, [batch / gpus ** 0.5], gpus=gpus)
                      for model in ("resnet50", "vgg16") for batch in (32, 64)
                      for gpus in (1, 2, 4)))
    report = build_report(items, options("exp.num_gpus=1"))
    assert "exp.effective_batch" in report.row_keys
    assert report.baseline_compared == ["exp.model", "exp.replica_batch"]
    speedups = {(r["model"], r["replica_batch"], r["gpus"]): r["speedup"]
                for r in report.records()}
    assert speedups == {(model, batch, gpus): {1: 1.0, 2: 2 ** 0.5, 4: 2.0}[gpus]   # was 1.41
                        for model in ("resnet50", "vgg16") for batch in (32, 64)
                        for gpus in (1, 2, 4)}


def test_one_gpu_model_against_another() -> None:
    # One spec run on H100 and on H200: one exp.id each, two rows (the device model).
    items = [record(timed(model, "pytorch", 32, [time_ms]), float(index),
                    environment={"gpu_model": gpu})
             for index, (gpu, time_ms) in enumerate((("NVIDIA H100 80GB HBM3", 100.0),
                                                     ("NVIDIA H200", 80.0)))
             for model in ("resnet50", "vgg16")]
    report = build_report(items, options("env.device_model=*H100*"))
    assert sorted((r["model"], r["device_model"], r["speedup"]) for r in report.records()) == [
        ("resnet50", "NVIDIA H100 80GB HBM3", 1.0), ("resnet50", "NVIDIA H200", 1.25),
        ("vgg16", "NVIDIA H100 80GB HBM3", 1.0), ("vgg16", "NVIDIA H200", 1.25)]
    # The recorded GPU model is no row key: the device model still is, and differs.
    with pytest.raises(ResultsError, match="the nearest baseline row has env.device_model "
                                           "NVIDIA H100 80GB HBM3, not NVIDIA H200") as refused:
        build_report(items, options("env.gpu_model=*H100*"))
    assert "(--baseline 'env.device_model=NVIDIA H100 80GB HBM3')" in refused.value.hint


def test_a_cell_compares_the_run_it_shows() -> None:
    # Issue 23: a cell shows the newest ok run of its experiment, never a mean of runs (it
    # compared the mean of both runs' medians, 120 ms).
    base = timed("resnet50", "pytorch", 1, [100.0])
    again = dict(base, **{"results.time_data": [140.0]})
    items = records(base, again, timed("resnet50", "mxnet", 1, [70.0]))
    [mxnet, pytorch] = build_report(items, options("framework=pytorch")).records()
    assert (pytorch["time_median"], pytorch["run"], pytorch["runs"], mxnet["speedup"]) == (
        140.0, 2, 2, 2.0)
    assert pytorch["notes"] == ["runs disagree: median batch time (ms) 100 (run 1), 140 (run "
                                "2) (and 1 other value(s))"]


@given(st.dictionaries(
    st.tuples(st.sampled_from(["resnet50", "vgg16"]), st.sampled_from([1, 8, 32]),
              st.sampled_from(["pytorch", "mxnet", "onnxruntime"])),
    st.floats(1.0, 1000.0), min_size=1, max_size=18))
def test_speedup_is_the_baseline_median_over_the_rows(times: dict[tuple[str, int, str],
                                                                   float]) -> None:
    items = records(*(timed(model, framework, batch, [value])
                      for (model, batch, framework), value in times.items()))
    wanted = options("exp.framework=pytorch")
    if any((model, batch, "pytorch") not in times for model, batch, _ in times):
        with pytest.raises(ResultsError, match="has no baseline row|no row of the report"):
            build_report(items, wanted)
        return
    for row in build_report(items, wanted).records():
        base = times[(row["model"], row["replica_batch"], "pytorch")]
        mine = times[(row["model"], row["replica_batch"], row["framework"])]
        assert row["speedup"] == base / mine     # issue 23: was rounded to 2 decimals


# -- which parameters are row keys -------------------------------------------------------

def mxnet_run(hybridize: bool, static: bool, time_ms: float,
              more_args: tuple[str, ...] = ()) -> dict[str, Any]:
    """An MXNet experiment whose argument list renders its graph parameters (and more)."""
    values = timed("resnet50", "mxnet", 1, [time_ms], **{
        "mxnet.hybridize": hybridize, "mxnet.static_graph": static})
    values["mxnet.args"] = ["--batch_size 1", f"--hybridize {str(hybridize).lower()}",
                            f"--static_graph {str(static).lower()}", *more_args]
    values["exp.id"] += "".join(more_args)
    return values


def test_an_argument_list_is_not_a_row_key_when_its_parameters_tell_rows_apart() -> None:
    # mxnet.static_graph and mxnet.args are both computed (the first follows
    # mxnet.hybridize, the second renders both): the one closer to what was set is tried first.
    items = records(mxnet_run(False, False, 100.0), mxnet_run(True, False, 80.0),
                    mxnet_run(True, True, 60.0))
    report = build_report(items, "regular")
    assert "mxnet.args" not in report.row_keys
    assert {"mxnet.hybridize", "mxnet.static_graph"} <= set(report.row_keys)


def test_an_argument_list_stays_a_row_key_when_only_it_differs() -> None:
    # Never merge different experiments: two runs differ only in their argument list (what
    # put "--fast" there is not in these records).
    items = records(mxnet_run(True, True, 60.0), mxnet_run(True, True, 50.0, ("--fast",)))
    report = build_report(items, "regular")
    assert "mxnet.args" in report.row_keys and len(report.records()) == 2


# -- the stored run of examples/graph_backends.yaml, as docs/performance.md shows it --------

GRAPH_BACKENDS = REPO / "bench" / "graph_backends" / "results" / "2026-11-26" / "logs"
OVER_EAGER = ["exp.framework=pytorch", "pytorch.compile=false", "pytorch.channels_last=false",
              "pytorch.freezing=false", "pytorch.compile_mode=default"]


def test_the_graph_backends_run_against_pytorch_eager(dlbs: Any) -> None:
    args = [arg for text in OVER_EAGER for arg in ("--baseline", text)]
    result = dlbs("report", str(GRAPH_BACKENDS), *args, "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    rows = document["rows"]
    assert len(rows) == 60     # 15 configurations x 3 rounds at batch 1, x 1 at batch 32
    assert not any(key.endswith(".args") for key in document["row_keys"])
    eager = [row for row in rows if row["framework"] == "pytorch" and not row["pytorch.compile"]
             and not row["pytorch.channels_last"]]
    assert len(eager) == 4 and {row["speedup"] for row in eager} == {1.0}
    for row in rows:
        [base] = [e for e in eager if (e["round"], e["replica_batch"]) == (
            row["round"], row["replica_batch"])]
        # Issue 23: exact values (they were rounded to 2 decimals: the test allowed 0.01).
        assert row["speedup"] == base["time_median"] / row["time_median"]
    # One line, the keys to add, and a failure exit when the baseline is not precise enough.
    vague = dlbs("report", str(GRAPH_BACKENDS), "--baseline", "exp.framework=pytorch",
                 "--baseline", "pytorch.compile=false")
    assert vague.returncode == 2 and vague.stdout == ""
    assert vague.stderr.startswith("dlbs: error: --baseline exp.framework=pytorch, "
                                   "pytorch.compile=false: the row (")
    assert len(vague.stderr.splitlines()) == 2 and "hint: " in vague.stderr


def test_baseline_from_the_command_line_in_process(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from dlbs.cli import main as cli_main

    for index, item in enumerate(TWO_FRAMEWORKS):
        write_log(tmp_path / f"{index}.log", item)
    assert cli_main.main(["report", str(tmp_path), "--baseline", "framework=pytorch",
                          "--columns", "speedup", "--format", "csv"]) == 0
    captured = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(captured.out)))
    assert sorted(float(row["speedup"]) for row in rows) == [1.0] * 4 + [2.0] * 3 + [3.0]
    assert "dlbs report: speedup: the median batch time" in captured.err


@pytest.mark.parametrize("batch", [1, 32])
def test_the_tables_of_docs_performance_are_this_report(batch: int) -> None:
    # docs/performance.md shows the report's markdown, not numbers computed on the side.
    from dlbs.results.sources import load_attempts

    report = build_report(load_attempts([GRAPH_BACKENDS]), options(
        *OVER_EAGER, columns=["time_median", "time_min", "throughput_median", "speedup"],
        filters=[Filter.parse(f"exp.replica_batch={batch}")]))
    rendered = render(report, "markdown").split("\n", 2)[2]   # without the title
    assert rendered.strip() in (REPO / "docs" / "performance.md").read_text()
