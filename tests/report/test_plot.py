"""`dlbs plot`: charts from real runs, presets, and one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dlbs.errors import ResultsError
from dlbs.report.plot import Chart, chart
from tests.report.conftest import dummy_run, records
from tests.results.helpers_results import experiment

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A weak-scaling sweep of the dummy backend over 1, 2 and 4 'GPUs', monitor on."""
    folder = tmp_path_factory.mktemp("plot") / "logs"
    result = dummy_run(folder, "-V", 'exp.gpus=["0", "0,1", "0,1,2,3"]',
                       "-V", 'exp.model=["resnet50", "vgg16"]', "-P", "exp.replica_batch=32",
                       "-P", "exp.num_batches=10", "-P", "dummy.sleep=0.01",
                       "-P", "monitor.frequency=0.02")
    assert result.returncode == 0, result.stderr
    return folder


@pytest.mark.slow
def test_presets_and_free_charts_from_a_real_sweep(sweep: Path, dlbs: Any,
                                                   tmp_path: Path) -> None:
    database = str(sweep / "results.db")
    made = {
        "weak.png": ["--preset", "weak"],
        "weak.svg": ["--preset", "weak", "--title", "Weak scaling"],
        "free.svg": ["--x", "exp.num_gpus", "--y", "throughput", "--series", "exp.model"],
        "bars.png": ["--x", "exp.model", "--y", "results.time_median", "--kind", "bar",
                     "--filter", "exp.num_gpus=1"],
    }
    for name, arguments in made.items():
        result = dlbs("plot", database, "-o", str(tmp_path / name), *arguments)
        assert result.returncode == 0, (name, result.stderr)
        assert result.stderr == f"dlbs plot: wrote {tmp_path / name}\n"
    assert (tmp_path / "weak.png").read_bytes().startswith(PNG)
    svg = (tmp_path / "weak.svg").read_text()
    # Axes labelled with their units; one line per model.
    for text in ("throughput (inst/s)", "efficiency (%)", "number of GPUs", "resnet50",
                 "vgg16", "Weak scaling"):
        assert text in svg, text
    free = (tmp_path / "free.svg").read_text()
    assert "throughput (inst/s)" in free and "gpus" in free.lower()
    # The monitor's series of one experiment, from its id's prefix.
    exp_id = next(sweep.glob("*.log")).stem.rsplit("_", 1)[1][:6]
    result = dlbs("plot", database, "--preset", "monitor", "--exp", exp_id,
                  "-o", str(tmp_path / "monitor.svg"))
    assert result.returncode == 0, result.stderr
    monitor = (tmp_path / "monitor.svg").read_text()
    assert "CPU (% of a core)" in monitor and "timed batches" in monitor


@pytest.mark.slow
def test_plot_errors_are_one_line(sweep: Path, dlbs: Any, tmp_path: Path) -> None:
    database = str(sweep / "results.db")
    for arguments, message in (
        (["-o", str(tmp_path / "x.pdf"), "--preset", "weak"], "written as .png or .svg"),
        (["-o", str(tmp_path / "x.png")], "needs --x KEY and --y"),
        (["-o", str(tmp_path / "x.png"), "--x", "exp.model", "--y", "throughput"],
         "rows keyed by nothing would combine different experiments: exp.num_gpus (3 "
         "values) also vary"),
        (["-o", str(tmp_path / "x.png"), "--preset", "monitor"], "name it with --exp"),
        (["-o", str(tmp_path / "x.png"), "--preset", "monitor", "--exp", "zzz"],
         "no experiment with that id"),
        (["-o", str(tmp_path / "x.png"), "--preset", "latency"], "no ok experiment has "
                                                                 "results.qps"),
    ):
        result = dlbs("plot", database, *arguments)
        assert result.returncode == 2, (arguments, result.stderr)
        assert result.stderr.startswith("dlbs: error: ") and message in result.stderr, \
            result.stderr
        assert not list(tmp_path.glob("x.*"))


def test_latency_preset_draws_percentiles_against_qps() -> None:
    # (Issue 23, item 6: the preset draws the latency report's experiments, which have a
    # scenario; these records had none.)
    items = records(*[experiment("resnet50", 1, 1, None, exp_id=f"q{qps}", **{
        "exp.scenario": "server",
        "exp.target_qps": qps, "results.qps": qps * 0.99, "results.latency_p50": 1.0 + qps / 1000,
        "results.latency_p90": 1.5 + qps / 800, "results.latency_p99": 2.0 + qps / 500})
        for qps in (100, 500, 1000)])
    figure = chart(items, Chart(preset="latency"))
    [axes] = figure.axes
    assert axes.get_xlabel() == "QPS (samples/s)" and axes.get_ylabel() == "latency (ms)"
    assert [line.get_label() for line in axes.get_lines()] == ["p50", "p90", "p99"]
    assert list(axes.get_lines()[2].get_ydata()) == [2.2, 3.0, 4.0]


def test_unknown_preset_and_kind() -> None:
    with pytest.raises(ResultsError, match="unknown preset 'pie'"):
        chart([], Chart(preset="pie"))
    with pytest.raises(ResultsError, match="unknown chart kind 'area'"):
        chart([], Chart(kind="area", x="a", y="b"))
