"""Report tables: the numbers of weak, strong and regular reports, checked exactly.

Issue 23 changed what these tests see: records carry stored values exactly (they were
rounded to 2 decimals), text rounds to significant digits (it printed 2 decimals), and a
cell shows one run of one experiment (it averaged the ok runs, `(n=K)`): the fields `run`
and `runs` replace `samples`.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest

from dlbs.errors import ResultsError
from dlbs.report import Options, build_report, render
from tests.report.conftest import record, records
from tests.results.helpers_results import experiment


def cells(kind: str, items: list[Any]) -> dict[tuple[Any, ...], dict[str, Any]]:
    report = build_report(items, kind)
    key = "replica_batch" if kind == "weak" else "effective_batch"
    return {(row["model"], row[key], row["gpus"]): row for row in report.records()}


WEAK = records(
    experiment("resnet50", 1, 32, 100.0),
    experiment("resnet50", 2, 32, 105.0),
    experiment("resnet50", 4, 32, 110.0),
    experiment("resnet50", 8, 32, 80.0),            # superlinear: efficiency above 100
    experiment("resnet50", 2, 64, 50.0),            # no one-GPU baseline in this row
    experiment("resnet50", 4, 64, 55.0),
    experiment("vgg16", 1, 16, None, status="failure"),
    experiment("vgg16", 2, 16, None, status="timeout"),
    experiment("vgg16", 4, 16, None, status="failure"),
)


def test_weak_scaling_numbers() -> None:
    table = cells("weak", WEAK)
    expected = {
        # gpus: (time ms, throughput, speedup, efficiency %)
        1: (100.0, 320.0, 1.0, 100.0),
        2: (105.0, 64000 / 105, 64000 / 105 / 320, 100 * 100 / 105),
        4: (110.0, 128000 / 110, 128000 / 110 / 320, 100 * 100 / 110),
        8: (80.0, 3200.0, 10.0, 125.0),        # not capped at 100
    }
    for gpus, (time_ms, throughput, speedup, efficiency) in expected.items():
        row = table[("resnet50", 32, gpus)]
        assert (row["time_ms"], row["throughput"], row["speedup"], row["efficiency"]) == (
            time_ms, throughput, speedup, efficiency), gpus
        assert (row["run"], row["runs"]) == (1, 1)
    no_base = table[("resnet50", 64, 4)]
    assert (no_base["throughput"], no_base["speedup"], no_base["efficiency"]) == (
        256000 / 55, None, None)
    assert not any(model == "vgg16" for model, _, _ in table)


STRONG = records(
    experiment("alexnet_owt", 1, 256, 200.0, dtype="float16", phase="inference"),
    experiment("alexnet_owt", 2, 128, 110.0, dtype="float16", phase="inference"),
    experiment("alexnet_owt", 4, 64, 50.0, dtype="float16", phase="inference"),
    experiment("alexnet_owt", 8, 32, 30.0, dtype="float16", phase="inference"),
    experiment("alexnet_owt", 8, 16, 40.0, dtype="float16", phase="inference"),
)


def test_strong_scaling_numbers() -> None:
    table = cells("strong", STRONG)
    expected = {
        1: (200.0, 1280.0, 1.0, 100.0),
        2: (110.0, 256000 / 110, 200 / 110, 100 * 200 / (2 * 110)),
        4: (50.0, 5120.0, 4.0, 100.0),
        8: (30.0, 256000 / 30, 200 / 30, 100 * 200 / (8 * 30)),
    }
    for gpus, (time_ms, throughput, speedup, efficiency) in expected.items():
        row = table[("alexnet_owt", 256, gpus)]
        assert (row["time_ms"], row["throughput"], row["speedup"], row["efficiency"]) == (
            time_ms, throughput, speedup, efficiency), gpus
        assert (row["dtype"], row["phase"]) == ("float16", "inference")
    other = table[("alexnet_owt", 128, 8)]
    assert (other["throughput"], other["speedup"]) == (3200.0, None)


def test_regular_report_numbers() -> None:
    report = build_report(records(
        experiment("resnet50", 1, 32, 100.0),
        experiment("resnet50", 1, 64, 160.0),
        experiment("resnet18", 1, 64, 40.0),
        experiment("resnet101", 1, 64, 300.0),
    ), "regular")
    rows = [(r["model"], r["replica_batch"], r["time_ms"], r["throughput"])
            for r in report.records()]
    # Models in natural order: resnet18 < resnet50 < resnet101.
    assert rows == [
        ("resnet18", 64, 40.0, 1600.0),
        ("resnet50", 32, 100.0, 320.0),
        ("resnet50", 64, 160.0, 400.0),
        ("resnet101", 64, 300.0, 64000 / 300),
    ]


def test_a_cell_shows_the_newest_run_and_counts_the_others() -> None:
    # Issue 23: the runs were averaged into one cell (105.67 ms, n=3).
    items = records(
        experiment("resnet50", 1, 32, 100.0),
        experiment("resnet50", 2, 32, 104.0, exp_id="x"),
        experiment("resnet50", 2, 32, 107.0, exp_id="x"),
        experiment("resnet50", 2, 32, 106.0, exp_id="x"),
    )
    row = cells("weak", items)[("resnet50", 32, 2)]
    assert (row["time_ms"], row["run"], row["runs"], row["efficiency"]) == (
        106.0, 3, 3, 100 * 100 / 106)
    assert row["notes"] == []       # within the 3% that dlbs compare calls "same"
    report = build_report(items, "weak")
    assert any(note.startswith("1 experiment(s) have older ok runs than the one shown")
               for note in report.footnotes())


def test_different_experiments_with_the_same_parameters_stay_apart() -> None:
    # Ids given by hand, nothing else differs: the exp.id column tells them apart.
    report = build_report(records(
        experiment("resnet50", 1, 32, 100.0, exp_id="run-a"),
        experiment("resnet50", 1, 32, 110.0, exp_id="run-b"),
    ), "regular")
    assert [(r["exp_id"], r["time_ms"], r["runs"]) for r in report.records()] == [
        ("run-a", 100.0, 1), ("run-b", 110.0, 1)]
    assert any("exp.id column tells them apart" in note for note in report.footnotes())


def test_newest_failure_shows_earlier_ok_attempts_unless_latest() -> None:
    items = records(
        experiment("resnet50", 1, 32, 100.0, exp_id="x"),
        experiment("resnet50", 1, 32, None, exp_id="x", status="failure"),
    )
    report = build_report(items, "regular")
    assert [r["time_ms"] for r in report.records()] == [100.0]
    assert report.latest_not_ok == 1 and not report.not_counted
    assert any("newest attempt is not ok" in note for note in report.footnotes())
    latest = build_report(items, Options(kind="regular", latest=True))
    assert latest.records() == [] and latest.not_counted == {"failure": 1}


def test_latest_keeps_the_newest_ok_attempt() -> None:
    items = [record(experiment("resnet50", 1, 32, t, exp_id="x"), recency)
             for t, recency in ((150.0, 1.0), (125.0, 3.0), (200.0, 2.0))]
    assert [r["time_ms"] for r in build_report(items, Options(latest=True)).records()] == [
        125.0]
    # Issue 23: the runs were averaged (158.33 ms, n=3); the newest ok run is shown, and
    # runs that disagree beyond their spread say so.
    [newest] = build_report(items, "regular").records()
    assert (newest["time_ms"], newest["run"], newest["runs"]) == (125.0, 3, 3)
    assert newest["notes"] == ["runs disagree: batch time (ms) 150 (run 1), 200 (run 2), 125 "
                               "(run 3) (and 1 other value(s))"]
    each = build_report(items, Options(runs="each"))
    assert each.row_keys[-1] == "run"
    assert [(r["run"], r["time_ms"]) for r in each.records()] == [
        (1, 150.0), (2, 200.0), (3, 125.0)]


def test_failed_and_incomplete_are_footnoted() -> None:
    report = build_report(WEAK + records(
        experiment("resnet50", 1, 8, None, exp_id="no-time"),
        experiment("", 1, 8, 10.0, exp_id="no-model"),
    ), "weak")
    assert report.not_counted == {"failure": 2, "timeout": 1}
    assert report.incomplete == {"a model": 1, "a batch time": 1}
    notes = report.footnotes()
    assert "Not counted (status not ok): 2 failure, 1 timeout." in notes
    assert "Not counted: 1 ok experiment(s) without a model." in notes
    assert "Not counted: 1 ok experiment(s) without a batch time." in notes
    for fmt in ("text", "markdown"):
        assert "2 failure, 1 timeout" in render(report, fmt)
    assert json.loads(render(report, "json"))["not_counted"] == {"failure": 2, "timeout": 1}


def test_cpu_experiments_scale_by_replicas() -> None:
    def cpu(nodes: int, time_ms: float) -> dict[str, Any]:
        item = experiment("resnet18", nodes, 16, time_ms, device="cpu")
        item["exp.num_replicas"] = nodes
        item["exp.num_nodes"] = nodes
        return item

    report = build_report(records(cpu(1, 400.0), cpu(2, 500.0)), "weak")
    rows = {r["gpus"]: r for r in report.records()}
    assert rows[2]["throughput"] == 64.0 and rows[2]["efficiency"] == 80.0
    assert report.scale_label == "replicas"


def test_text_report_shows_the_numbers() -> None:
    text = render(build_report(WEAK, "weak"), "text")
    assert text.startswith("Weak scaling (same replica batch)\n")
    assert "All rows: framework pytorch, phase training, dtype float32, device gpu." in text
    efficiency = text.split("efficiency (%), by number of GPUs\n", 1)[1]
    header, rule, first, second = efficiency.splitlines()[:4]
    assert header.split() == ["model", "replica", "batch", "1", "2", "4", "8"]
    assert set(rule) <= {"-", " "}
    assert first.split() == ["resnet50", "32", "100", "95.24", "90.91", "125"]
    assert second.split() == ["resnet50", "64", "-", "-", "-", "-"]
    assert "\x1b" not in text and all(line == line.rstrip() for line in text.splitlines())


def test_markdown_report_rows() -> None:
    text = render(build_report(STRONG, "strong"), "markdown")
    assert "| model | effective batch | 1 | 2 | 4 | 8 |" in text
    assert "|:---|---:|---:|---:|---:|---:|" in text
    assert "| alexnet_owt | 256 | 100 | 90.91 | 100 | 83.33 |" in text
    assert "| alexnet_owt | 256 | 1280 | 2327 | 5120 | 8533 |" in text


def test_markdown_shows_the_newest_run_and_why_runs_disagree() -> None:
    # Issue 23: this was "105.00 (n=2) | 305.45 (n=2)", means of both runs.
    text = render(build_report(records(
        experiment("resnet50", 1, 32, 100.0, exp_id="a"),
        experiment("resnet50", 1, 32, 110.0, exp_id="a"),
    ), "regular"), "markdown")
    # A long note is a word and a marker in its row, its text under the table (issue 33.7).
    assert "| resnet50 | 32 | 32 | 110 | 290.9 | runs disagree [1] |" in text
    assert "[1] runs disagree: batch time (ms) 100 (run 1), 110 (run 2) (and 1 other " \
        "value(s))" in text
    assert "have older ok runs than the one shown" in text and "n=" not in text


def test_csv_report_is_one_line_per_cell() -> None:
    report = build_report(WEAK, "weak")
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    assert list(rows[0]) == report.fields()
    by_gpus = {(row["replica_batch"], row["gpus"]): row for row in rows}
    assert by_gpus[("32", "2")]["efficiency"] == repr(100 * 100 / 105)
    assert by_gpus[("32", "4")]["throughput"] == repr(128000 / 110)
    assert by_gpus[("32", "1")]["throughput"] == "320.0"
    assert by_gpus[("64", "2")]["speedup"] == ""
    assert len(rows) == 6


def test_json_report_is_versioned() -> None:
    document = json.loads(render(build_report(STRONG, "strong"), "json"))
    assert (document["format"], document["version"], document["type"]) == (
        "dlbs-report", 3, "strong")
    assert document["counted"] == 5 and document["not_counted"] == {}
    assert document["row_keys"] == ["exp.model", "exp.effective_batch"]
    assert document["constants"]["exp.dtype"] == "float16"
    row = next(r for r in document["rows"] if r["gpus"] == 8 and r["effective_batch"] == 256)
    assert (row["speedup"], row["efficiency"]) == (200 / 30, 100 * 200 / (8 * 30))


def test_empty_report_says_so() -> None:
    report = build_report(records(experiment("x", 1, 1, None, status="failure")), "weak")
    text = render(report, "text")
    assert "No ok experiments to report." in text and "1 failure" in text


def test_unknown_type_and_format() -> None:
    with pytest.raises(ResultsError, match="unknown report type 'linear'"):
        build_report([], "linear")
    with pytest.raises(ResultsError, match="unknown report format 'pdf'"):
        render(build_report([], "weak"), "pdf")


def test_spread_is_reported_and_bounds_what_is_significant() -> None:
    items = records(
        experiment("resnet50", 1, 32, 100.0, **{"results.time_std": 2.0}),
        experiment("resnet50", 2, 32, 104.0, **{"results.time_std": 7.28}),
        experiment("resnet50", 4, 32, 110.0),
    )
    report = build_report(items, "weak")
    by_gpus = {row["gpus"]: row for row in report.records()}
    assert by_gpus[1]["time_std_pct"] == 2.0
    assert by_gpus[2]["time_std_pct"] == 7.0
    assert by_gpus[4]["time_std_pct"] is None
    assert ("Batch-time spread (std / mean): at most 7.0% (resnet50, 2 GPUs); differences "
            "smaller than the spread are not significant.") in report.footnotes()


def test_statistics_come_from_the_per_batch_times() -> None:
    # The backend's own summary says 50 ms (and a population std); its batches say 40.
    times = [30.0, 40.0, 50.0]
    item = experiment("resnet50", 1, 32, 50.0, **{
        "results.time_data": times, "results.time_std": 8.16496580927726,
        "results.time_median": 40.0})
    report = build_report(records(item), Options(columns=[
        "time", "results.time_median", "time_std", "time_p90", "throughput"]))
    [row] = report.records()
    assert (row["time_ms"], row["time_median"], row["time_std"], row["time_p90"]) == (
        40.0, 40.0, 10.0, 48.0)                        # std with ddof=1; p90 interpolated
    assert row["throughput"] == 800.0                  # 32 x 1000 / 40
    [warning] = report.stats_warnings
    assert warning.startswith("results.time: the backend printed 50.0, its per-batch times "
                              "give 40")
    assert any("contradict" in note for note in report.footnotes())
