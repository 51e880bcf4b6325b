"""What a user reads is what was measured (issue 23, items 1, 3 and 5).

Runs of one experiment are never averaged into one cell; machine formats carry stored values
exactly and text rounds to significant digits; LoadGen's verdict, a backend's warnings and
contradicted summaries stand beside the numbers, in every report kind.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import pytest

from dlbs.report import Options, build_report, render
from dlbs.report.html import render_html
from dlbs.report.numbers import significant
from tests.report.conftest import records
from tests.results.helpers_results import experiment


def single_stream(p50: float, p90: float, **extra: Any) -> dict[str, Any]:
    """A LoadGen single-stream run of one experiment (id `ss`)."""
    values = experiment("resnet50", 1, 1, None, exp_id="ss", phase="inference", **{
        "exp.scenario": "single_stream", "results.latency_p50": p50,
        "results.latency_p90": p90, "results.latency_p99": p90 * 1.1,
        "results.qps": 1000.0 / p50, "results.loadgen_valid": True})
    values.update(extra)
    return values


# -- item 1: runs are never averaged ---------------------------------------------------------

def test_loadgen_runs_of_one_experiment_are_never_averaged() -> None:
    # The case: a rerun at 5.66 ms after a first run at 439.98 ms printed
    # "222.82 (n=2)", a mean that matches no LoadGen summary, with no warning.
    items = records(single_stream(439.98, 450.0), single_stream(5.66, 5.9))
    report = build_report(items, "latency")
    [row] = report.records()
    assert (row["latency_p50"], row["run"], row["runs"]) == (5.66, 2, 2)
    assert row["notes"] == ["runs disagree: latency p50 (ms) 440 (run 1), 5.66 (run 2) (and 3 "
                            "other value(s))"]
    text = render(report, "text")
    assert "222.8" not in text and "n=2" not in text
    assert "runs disagree: latency p50 (ms) 440 (run 1), 5.66 (run 2)" in text
    assert "1 experiment(s) have older ok runs than the one shown" in text
    each = build_report(items, Options(kind="latency", runs="each"))
    assert [(r["run"], r["latency_p50"]) for r in each.records()] == [(1, 439.98), (2, 5.66)]
    assert "run" in each.row_keys and each.older_runs == 0


def test_runs_within_their_spread_are_not_flagged() -> None:
    # p50 to p90 is 8% of the latency; 2% apart is within it (and within 3%).
    items = records(single_stream(5.66, 6.1), single_stream(5.77, 6.2))
    [row] = build_report(items, "latency").records()
    assert row["latency_p50"] == 5.77 and row["notes"] == []


def test_runs_of_different_experiments_are_never_compared() -> None:
    items = records(single_stream(439.98, 450.0), single_stream(5.66, 5.9, **{"exp.id": "b"}))
    report = build_report(items, "latency")
    assert [row["notes"] for row in report.records()] == [[], []]
    assert report.older_runs == 0


def test_latest_still_drops_an_experiment_whose_newest_attempt_failed() -> None:
    items = records(single_stream(5.66, 5.9), single_stream(5.7, 5.9, **{
        "results.status": "failure"}))
    shown = build_report(items, "latency")
    assert [row["latency_p50"] for row in shown.records()] == [5.66]
    assert shown.latest_not_ok == 1
    assert build_report(items, Options(kind="latency", latest=True)).records() == []


# -- item 3: exact machine formats, significant digits for people ---------------------------

def accuracy_run(top1: float, top5: float, samples: int) -> dict[str, Any]:
    return experiment("resnet50", 1, 8, None, exp_id="acc", phase="inference", **{
        "exp.scenario": "accuracy", "results.top1": top1, "results.top5": top5,
        "results.num_samples": samples})


def test_machine_formats_carry_the_stored_values() -> None:
    # Before: top-5 0.935 was 0.94 in text, CSV and JSON; 200 samples were 200.00.
    report = build_report(records(accuracy_run(0.7612345678901234, 0.935, 200)), "accuracy")
    [row] = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    assert (row["top1"], row["top5"], row["num_samples"]) == (
        "0.7612345678901234", "0.935", "200")
    [document] = json.loads(render(report, "json"))["rows"]
    assert (document["top1"], document["top5"], document["num_samples"]) == (
        0.7612345678901234, 0.935, 200)
    assert type(document["num_samples"]) is int
    text = render(report, "text")
    line = next(line for line in text.splitlines() if line.startswith("resnet50"))
    assert line.split()[-3:] == ["0.7612", "0.935", "200"]


@pytest.mark.parametrize("value, text", [
    (0.935, "0.935"), (200.0, "200"), (64000 / 105, "609.5"), (128000 / 110, "1164"),
    (100 * 100 / 105, "95.24"), (0.0001234567, "0.0001235"), (123456.7, "123457"),
    (-2.5, "-2.5"), (0.0, "0"), (1e20, "100000000000000000000"), (math.nan, "-"),
    (math.inf, "-"), (0.99996, "1"), (2.675, "2.675"),
])
def test_text_rounds_to_significant_digits(value: float, text: str) -> None:
    assert significant(value) == text


# -- item 5 and warnings: notes beside the numbers, in every kind ----------------------------

def test_an_invalid_loadgen_run_says_so_and_why() -> None:
    items = records(single_stream(5.66, 5.9), single_stream(
        7.0, 8.0, **{"exp.id": "short", "results.loadgen_valid": False,
                     "results.loadgen_invalid_reasons": ["min duration not met",
                                                         "min queries not met"]}),
        single_stream(7.5, 8.0, **{"exp.id": "plain", "results.loadgen_valid": False}))
    report = build_report(items, "latency")
    notes = {row["exp_id"]: row["notes"] for row in report.records()}
    assert notes == {"ss": [], "plain": ["INVALID (LoadGen)"],
                     "short": ["INVALID (LoadGen): min duration not met; min queries not met"]}
    text = render(report, "text")
    invalid = [line for line in text.splitlines() if "INVALID" in line]
    assert [line.split()[0] for line in invalid] == ["resnet50", "resnet50", "[1]"]
    # LoadGen's reasons are a footnote: the row holds a word and its marker (issue 33.7).
    assert invalid[0].rstrip().endswith("INVALID [1]") or \
        invalid[1].rstrip().endswith("INVALID [1]")
    assert invalid[2] == "[1] INVALID (LoadGen): min duration not met; min queries not met"
    assert "INVALID (LoadGen): min duration not met" in render_html(report)


def warned(gpus: int, time_ms: float, *warnings: str) -> dict[str, Any]:
    return experiment("resnet50", gpus, 32, time_ms, **{"results.warnings": list(warnings)})


def test_backend_warnings_stand_beside_their_row_in_every_kind() -> None:
    items = records(warned(1, 100.0), warned(2, 60.0, "2 recompilations after warm-up"),
                    warned(4, 40.0))
    regular = build_report(items, "regular")
    by_gpus = {row["gpus"]: row["notes"] for row in regular.records()}
    assert by_gpus == {1: [], 2: ["warning: 2 recompilations after warm-up"], 4: []}
    line = next(line for line in render(regular, "text").splitlines()
                if line.startswith("resnet50") and " 60 " in f" {line} ")
    assert line.endswith("warning: 2 recompilations after warm-up")
    # A column axis: a marker after the value, the note under the tables.
    weak = render(build_report(items, "weak"), "text")
    assert "[1]" in weak.split("resnet50", 1)[1].splitlines()[0]
    assert "[1] resnet50, 32, 2 GPUs: warning: 2 recompilations after warm-up" in weak
    markdown = render(build_report(items, "weak"), "markdown")
    assert "[1] resnet50, 32, 2 GPUs: warning: 2 recompilations after warm-up" in markdown
    pivot = build_report(items, Options(kind="pivot", rows=["exp.model"], cols="exp.num_gpus",
                                        value="results.time"))
    assert "[1] resnet50, gpus 2: warning" in render(pivot, "text")
    [csv_row] = [row for row in csv.DictReader(io.StringIO(render(regular, "csv")))
                 if row["gpus"] == "2"]
    assert json.loads(csv_row["notes"]) == ["warning: 2 recompilations after warm-up"]


def test_contradicted_summaries_stand_beside_their_row() -> None:
    item = experiment("resnet50", 1, 32, 50.0, **{"results.time_data": [30.0, 40.0, 50.0]})
    [row] = build_report(records(item), "regular").records()
    assert row["notes"] == ["warning: results.time: the backend printed 50.0, its per-batch "
                            "times give 40"]


def test_the_data_wait_share_is_a_column() -> None:
    # The backend's share where it printed one (PyTorch), else the mean wait over the mean
    # step (MXNet prints only results.time_data_wait); none without real data.
    items = records(experiment("resnet50", 1, 32, 80.0, **{"results.time_data_wait": 20.0}),
                    experiment("resnet18", 1, 32, 80.0, **{"results.time_data_wait": 20.0,
                                                           "results.data_wait": 0.2}),
                    experiment("vgg16", 1, 32, 50.0))
    report = build_report(items, Options(columns=["time", "data_wait"]))
    assert {row["model"]: row["data_wait"] for row in report.records()} == {
        "resnet50": 0.25, "resnet18": 0.2, "vgg16": None}
    assert "data wait (share of the step time)" in render(report, "text")


def test_a_backend_warning_travels_through_the_results_database(tmp_path: Any) -> None:
    # Kept with the engine's warnings (a flagged column): no summary is read to find it.
    # The LoadGen harness prints results.stats_warnings itself; other backends may print
    # results.warnings; the engine keeps both beside its own.
    from dlbs.results.sources import load_attempts
    from dlbs.results.store import open_store

    database = tmp_path / "results.db"
    with open_store(database) as store:
        for gpus, key, warnings in ((1, "results.warnings", []),
                                    (2, "results.warnings", ["3 recompilations"]),
                                    (4, "results.stats_warnings", ["host-bound pace"])):
            params = experiment("resnet50", gpus, 32, None, status=None)
            store.record_attempt(params["exp.id"], 1, params, "ok", results={
                "results.time_data": [10.0, 10.0], "results.time": 12.0, key: warnings})
    report = build_report(load_attempts([database]), "weak")
    contradicted = "warning: results.time: the backend printed 12.0, its per-batch times give 10"
    assert [cell.notes for cell in sorted(report.cells, key=lambda cell: cell.column)] == [
        [contradicted], ["warning: 3 recompilations", contradicted],
        ["warning: host-bound pace", contradicted]]
    # The footnote counts the contradictions alone.
    assert report.stats_warnings == [contradicted.removeprefix("warning: ")] * 3
