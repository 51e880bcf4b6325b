"""Charts and the HTML page say what they draw (issue 23, items 6 and 7)."""

from __future__ import annotations

import html
from typing import Any

import pytest

from dlbs.errors import ResultsError
from dlbs.report import Options, build_report
from dlbs.report.html import render_html
from dlbs.report.plot import Chart, chart, pivot_figure, report_chart
from tests.report.conftest import records
from tests.results.helpers_results import experiment


def loadgen(scenario: str, batch: int, qps: float, p50: float, **extra: Any) -> dict[str, Any]:
    return experiment("resnet50", 1, batch, None, exp_id=f"{scenario}-{batch}-{qps}",
                      phase="inference", **{
                          "exp.scenario": scenario, "exp.target_qps": qps,
                          "results.qps": qps or 100.0 / p50, "results.latency_p50": p50,
                          "results.latency_p90": p50 * 1.2, "results.latency_p99": p50 * 1.5,
                          **extra})


def test_the_latency_preset_draws_one_panel_per_scenario() -> None:
    # Before: one line across every scenario's points.
    items = records(loadgen("server", 4, 20.0, 5.0), loadgen("server", 4, 40.0, 7.0),
                    loadgen("single_stream", 1, 0.0, 2.0))
    figure = chart(items, Chart(preset="latency"))
    panels = {axes.get_title(): axes for axes in figure.axes}
    assert set(panels) == {"scenario server", "scenario single_stream"}
    server = {line.get_label(): list(line.get_xdata()) for line in panels[
        "scenario server"].get_lines()}
    assert server == {"p50": [20.0, 40.0], "p90": [20.0, 40.0], "p99": [20.0, 40.0]}
    assert [len(line.get_xdata()) for line in panels["scenario single_stream"].get_lines()] == [
        1, 1, 1]


def test_the_latency_preset_refuses_to_join_different_experiments() -> None:
    items = records(loadgen("offline", 2, 0.0, 200.0), loadgen("offline", 4, 0.0, 220.0))
    with pytest.raises(ResultsError, match=r"within a scenario exp.replica_batch \(2 values\) "
                                           r"also vary") as refused:
        chart(items, Chart(preset="latency"))
    assert "--filter exp.replica_batch=" in str(refused.value.hint)


def test_the_html_latency_page_does_not_speak_of_per_batch_times() -> None:
    page = html.unescape(render_html(build_report(records(loadgen("server", 4, 20.0, 5.0)),
                                                  "latency")))
    assert "per-batch times" not in page and "LoadGen's own measurements" in page
    benchmark = html.unescape(render_html(build_report(records(
        experiment("resnet50", 1, 32, 100.0)), "regular")))
    assert "per-batch times" in benchmark and "LoadGen's own" not in benchmark


def test_bar_labels_name_their_keys_and_integer_axes_have_integer_ticks() -> None:
    items = records(*[experiment("resnet50", gpus, 32, 100.0 / gpus, exp_id=f"g{gpus}")
                      for gpus in (1, 2, 4)])
    figure, _ = report_chart(build_report(items, "regular"))
    [axes] = figure.axes
    assert axes.get_ylabel() == "model, gpus, replica batch, effective batch"
    pivot = build_report(items, Options(kind="pivot", rows=["exp.model"], cols="exp.num_gpus",
                                        value="results.time"))
    [axes] = pivot_figure(pivot).axes
    assert list(axes.get_xticks()) == [1, 2, 4]     # before: 1.0, 1.5, 2.0, ... 4.0
