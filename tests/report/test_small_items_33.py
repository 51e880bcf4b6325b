"""Issue 33, item 7: the smaller things a team meets in reports and charts.

LoadGen's reasons are a footnote, not 270 characters in a row; the latency chart gives each
scenario its own scale; a weak chart over one GPU count says why it has nothing to draw; and
report, compare and history each say which statistic their times are.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlbs.report import build_report, render
from dlbs.report.html import render_html
from dlbs.report.plot import latency_bars_figure
from dlbs.results.store import open_store
from tests.cli.test_plan_cli import assert_one_error_line
from tests.report.conftest import records
from tests.results.helpers_results import experiment, nightly_attempt

REASONS = ["min duration not met: the run took 0.42 s of the 600 s required, so the "
           "results are not representative; increase the expected QPS or the duration",
           "min queries not met: 96 of 24576 queries"]


def _loadgen(scenario: str, p50: float, exp_id: str, **extra) -> dict:
    values = experiment("resnet50", 1, 1, None, exp_id=exp_id, phase="inference", **{
        "exp.scenario": scenario, "results.latency_p50": p50,
        "results.latency_p90": p50 * 1.2, "results.latency_p99": p50 * 1.5,
        "results.qps": 1000.0 / p50, "results.loadgen_valid": True})
    values.update(extra)
    return values


def test_loadgen_reasons_are_one_footnote_however_many_rows_share_them() -> None:
    invalid = {"results.loadgen_valid": False, "results.loadgen_invalid_reasons": REASONS}
    report = build_report(records(
        _loadgen("single_stream", 5.0, "a", **invalid),
        _loadgen("single_stream", 6.0, "b", **{**invalid, "exp.replica_batch": 2}),
        _loadgen("server", 7.0, "c")), "latency")
    text = render(report, "text")
    rows = [line for line in text.splitlines() if line.startswith("resnet50")]
    assert sum(line.rstrip().endswith("INVALID [1]") for line in rows) == 2
    assert not any("min duration" in line for line in rows)
    assert text.count("min duration not met") == 1
    assert f"[1] INVALID (LoadGen): {'; '.join(REASONS)}" in text
    assert f"[1] INVALID (LoadGen): {'; '.join(REASONS)}" in render(report, "markdown")
    # Machine formats keep the whole text in every row.
    assert [row["notes"] for row in report.records()].count(
        [f"INVALID (LoadGen): {'; '.join(REASONS)}"]) == 2


def test_the_latency_chart_gives_each_scenario_its_scale() -> None:
    report = build_report(records(_loadgen("single_stream", 5.0, "a"),
                                  _loadgen("offline", 3200.0, "b"),
                                  _loadgen("server", 8.0, "c")), "latency")
    figure = latency_bars_figure(report)
    limits = {axes.get_title(): axes.get_xlim()[1] for axes in figure.axes}
    assert set(limits) == {"scenario single_stream", "scenario offline", "scenario server"}
    assert limits["scenario single_stream"] < 20 and limits["scenario offline"] > 3000
    page = render_html(report)
    assert page.count("<svg") == 1 and "one panel per scenario" in page


def test_a_scaling_chart_over_one_gpu_count_says_why_it_draws_nothing(tmp_path: Path,
                                                                      dlbs_cli) -> None:
    database = tmp_path / "results.db"
    with open_store(database) as store:
        store.record_attempts([nightly_attempt("resnet18", 1, 10.0 * batch, batch=batch,
                                               exp_id=f"b{batch}") for batch in (4, 8, 16)])
    result = dlbs_cli("plot", str(database), "--preset", "weak", "-o", str(tmp_path / "w.svg"))
    assert_one_error_line(result, "nothing to scale: every experiment ran on 1 GPUs",
                          "--x exp.replica_batch --y results.throughput")
    assert not (tmp_path / "w.svg").exists()
    report = dlbs_cli("report", str(database), "--type", "weak", "--format", "html")
    assert report.returncode == 0, report.stderr
    assert 'id="no-chart">no chart: nothing to scale' in report.stdout
    assert "Every experiment ran on one GPU count (1): there is nothing to scale" in \
        report.stdout


@pytest.mark.parametrize("command, said", [
    (["report"], "Values: batch time is the mean of each run's timed batches (dlbs compare "
                 "and dlbs history follow their median, results.time_median)"),
    (["compare", "--tags", "nightly-01", "nightly-02"],
     "Comparison of the median batch time (ms) of each experiment's newest attempt"),
    (["history"], "results.time_median (median batch time (ms)) of each run"),
    (["history", "--check"], "results.time_median (median batch time (ms)) of the newest run "
                             "against its window"),
])
def test_each_command_says_which_statistic_it_shows(tmp_path: Path, dlbs_cli,
                                                    command: list[str], said: str) -> None:
    database = tmp_path / "results.db"
    with open_store(database) as store:
        store.record_attempts([nightly_attempt("resnet18", day, 10.0, samples=20)
                               for day in range(1, 5)])
    result = dlbs_cli(command[0], str(database), *command[1:])
    assert result.returncode == 0, result.stderr
    assert said in "\n".join(result.stdout.splitlines()[:4])
