"""`dlbs report --type efficiency`, the efficiency columns elsewhere, the plot preset, compare.

A batch sweep on an H100 whose energy the monitor measured (the summary's keys given as
stored) and whose FLOPs the backend counted: MFU is derived when the records are made.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dlbs.errors import ResultsError
from dlbs.report.compare import compare
from dlbs.report.metrics import EFFICIENCY_COLUMNS, metric
from dlbs.report.plot import Chart, chart
from dlbs.report.render import render
from dlbs.report.render_compare import render_comparison
from dlbs.report.tables import Options, build_report
from dlbs.results.store import open_store
from tests.report.conftest import records

FLOPS = 24.3e9  # ResNet-50 training, per image
H100 = "NVIDIA H100 80GB HBM3"


def sweep_point(batch: int, images_per_s: float, watts: float, **extra: Any) -> dict:
    """One experiment: its batches at `images_per_s`, drawing `watts` over 10 s."""
    batch_ms = batch * 1000.0 / images_per_s
    return {
        "exp.id": f"rn50-{batch}", "exp.model": "resnet50", "exp.framework": "pytorch",
        "exp.dtype": "float16", "exp.phase": "training", "exp.device_type": "gpu",
        "exp.num_gpus": 1, "exp.replica_batch": batch, "exp.effective_batch": batch,
        "exp.use_tensor_core": True, "results.status": "ok",
        "results.time_data": [batch_ms] * 20, "results.flops_per_sample": FLOPS,
        "results.gpu_model": H100, "results.mem_peak": 50.0 * batch,
        "results.energy_j": watts * 10.0, "results.power_avg_w": watts,
        "results.energy_per_sample_j": watts / images_per_s,
        "results.samples_per_joule": images_per_s / watts,
        "results.energy_source": "nvml counter", **extra,
    }


SWEEP = ((64, 3000.0, 400.0), (128, 4200.0, 450.0), (256, 4900.0, 470.0))


def sweep(**extra: Any) -> list:
    return records(*(sweep_point(*point, **extra) for point in SWEEP))


def values_by_batch(report) -> dict[int, dict[str, Any]]:
    column = report.row_keys.index("exp.replica_batch")
    return {shown[column]: next(iter(cells.values())).values for shown, cells in report.rows()}


def test_the_efficiency_report_has_its_columns_and_derives_mfu() -> None:
    report = build_report(sweep(), Options(kind="efficiency"))
    assert [item.key for item in report.metrics] == list(EFFICIENCY_COLUMNS)
    rows = values_by_batch(report)
    assert sorted(rows) == [64, 128, 256]
    best = rows[256]
    assert best["results.throughput"] == pytest.approx(4900.0)
    assert best["results.energy_per_sample_j"] == pytest.approx(470.0 / 4900.0)
    assert best["results.samples_per_joule"] == pytest.approx(4900.0 / 470.0)
    assert best["results.achieved_tflops"] == pytest.approx(FLOPS * 4900.0 / 1e12)
    assert best["results.mfu"] == pytest.approx(FLOPS * 4900.0 / 989.5e12)
    assert best["results.gpu_mem_peak_mb"] == pytest.approx(50.0 * 256)
    # The most energy-efficient setting of the sweep reads off one column.
    assert max(rows, key=lambda b: rows[b]["results.samples_per_joule"]) == 256


def test_a_regular_report_shows_energy_and_mfu_beside_the_throughput() -> None:
    shown = [item.key for item in build_report(sweep(), Options(kind="regular")).metrics]
    assert shown == ["results.time", "results.throughput", "results.energy_per_sample_j",
                     "results.mfu"]
    plain = records(*({k: v for k, v in sweep_point(*point).items()
                       if k not in ("results.flops_per_sample", "results.energy_per_sample_j")}
                      for point in SWEEP))
    shown = [item.key for item in build_report(plain, Options(kind="regular")).metrics]
    assert shown == ["results.time", "results.throughput"]  # nothing measured: no columns


def test_every_report_type_takes_the_columns() -> None:
    columns = ["energy_per_sample_j", "samples_per_joule", "power_avg_w", "achieved_tflops",
               "mfu", "gpu_mem_peak_mb"]
    for kind in ("regular", "efficiency"):
        report = build_report(sweep(), Options(kind=kind, columns=columns))
        assert [item.title for item in report.metrics] == [
            "energy per sample (J)", "samples per joule", "average power (W)",
            "achieved TFLOPS", "MFU (of the dense peak)", "GPU peak memory, allocator (MiB)"]
    pivot = build_report(sweep(), Options(kind="pivot", rows=["exp.model"],
                                          cols="exp.replica_batch",
                                          value="energy_per_sample_j"))
    assert pivot.cells


def test_the_efficiency_preset_draws_throughput_against_power(tmp_path: Path) -> None:
    figure = chart(sweep(), Chart(preset="efficiency"))
    axes = figure.axes[0]
    assert axes.get_xlabel() == metric("results.power_avg_w").title
    assert axes.get_ylabel() == metric("results.throughput").title
    points = sorted((line.get_xdata()[0], line.get_ydata()[0]) for line in axes.lines
                    if line.get_marker() == "o")
    assert points == [(400.0, pytest.approx(3000.0)), (450.0, pytest.approx(4200.0)),
                      (470.0, pytest.approx(4900.0))]


def test_the_preset_without_power_says_how_to_get_it() -> None:
    plain = records(*({k: v for k, v in sweep_point(*point).items()
                       if not k.startswith(("results.energy", "results.power",
                                            "results.samples_per"))} for point in SWEEP))
    with pytest.raises(ResultsError, match="no ok experiment has an average power") as error:
        chart(plain, Chart(preset="efficiency"))
    assert "monitor.energy" in error.value.hint
    assert error.value.message.endswith(": no energy reading was stored (measured with "
                                        "monitor.energy false and monitor.frequency 0, or by "
                                        "an older dlbs) (3 experiment(s))")


NO_RAPL = "no RAPL counters: /sys/class/powercap: No such file or directory"


def cpu_sweep() -> list:
    """The sweep on a CPU without readable RAPL: no energy, TFLOPS but no MFU, with reasons."""
    return records(*({**{k: v for k, v in sweep_point(*point).items()
                         if not k.startswith(("results.energy", "results.power",
                                              "results.samples_per", "results.gpu_model"))},
                      "exp.device_type": "cpu", "results.energy_unavailable": NO_RAPL}
                     for point in SWEEP))


def test_the_preset_on_a_cpu_without_rapl_says_so() -> None:
    with pytest.raises(ResultsError) as error:
        chart(cpu_sweep(), Chart(preset="efficiency"))
    assert error.value.message == ("nothing to plot: no ok experiment has an average power: "
                                   f"{NO_RAPL} (3 experiment(s))")


def test_the_report_says_in_a_footnote_why_rows_have_no_energy_or_mfu() -> None:
    report = build_report(cpu_sweep(), Options(kind="efficiency"))
    notes = report.footnotes()
    energy_note = ("energy per sample (J), samples per joule, average power (W): none in 3 "
                   "row(s) (resnet50, 64, 64; resnet50, 128, 128; resnet50, 256, 256): "
                   f"{NO_RAPL}.")
    assert energy_note in notes
    [mfu_note] = [note for note in notes if note.startswith(metric("results.mfu").title)]
    assert mfu_note.endswith("a CPU run: dlbs's peak table holds GPUs only (configs/peaks/"
                             "gpu_peak_tflops.yaml); set exp.peak_tflops to the CPU's peak "
                             "TFLOPS for an MFU.")
    # The achieved TFLOPS are there (FLOPs were counted): no note about them.
    assert not any(note.startswith(metric("results.achieved_tflops").title) for note in notes)
    text = render(report, "text")
    assert energy_note in " ".join(text.split())
    assert energy_note in json.loads(render(report, "json"))["notes"]


def test_a_footnote_groups_rows_by_reason_and_names_a_few() -> None:
    points = [(batch, 1000.0 + batch, 300.0) for batch in (1, 2, 4, 8, 16)]
    made = records(*({**{k: v for k, v in sweep_point(*point).items()
                         if not k.startswith(("results.energy", "results.power",
                                              "results.samples_per"))},
                      "results.energy_unavailable": "why A" if point[0] < 16 else "why B"}
                     for point in points))
    notes = build_report(made, Options(kind="efficiency")).footnotes()
    assert ("energy per sample (J), samples per joule, average power (W): none in 4 row(s) "
            "(resnet50, 1, 1; resnet50, 2, 2; resnet50, 4, 4; and 1 more): why A.") in notes
    assert ("energy per sample (J), samples per joule, average power (W): none in 1 row(s) "
            "(resnet50, 16, 16): why B.") in notes
    # Rows with their energy get no note at all.
    assert not [note for note in build_report(sweep(), Options(kind="efficiency")).footnotes()
                if "none in" in note]


def test_compare_shows_the_columns_of_both_sides() -> None:
    base = sweep()
    new = records(*(sweep_point(batch, speed * 1.1, watts * 1.2)
                    for batch, speed, watts in SWEEP))
    comparison = compare(base, new, columns=["energy_per_sample_j", "mfu"])
    (energy_metric, before, after), (mfu_metric, _, _) = comparison.extra
    assert (energy_metric.field, mfu_metric.field) == ("energy_per_sample_j", "mfu")
    assert sorted(after / before) == pytest.approx([1.2 / 1.1] * 3)
    document = json.loads(render_comparison(comparison, "json"))
    match = document["matches"][0]
    assert match["energy_per_sample_j_change"] == pytest.approx(1.2 / 1.1 - 1)
    assert match["new_mfu"] == pytest.approx(match["base_mfu"] * 1.1)
    text = render_comparison(comparison, "text")
    assert "BASE energy per sample (J)" in text and "+9.1%" in text
    csv_header = render_comparison(comparison, "csv").splitlines()[0]
    assert "base_energy_per_sample_j,new_energy_per_sample_j,energy_per_sample_j_change" \
        in csv_header


def test_compare_refuses_a_column_no_experiment_has() -> None:
    with pytest.raises(ResultsError, match="no experiment has results.joules"):
        compare(sweep(), sweep(), columns=["joules"])


@pytest.mark.slow
def test_the_commands_on_a_database(tmp_path: Path, dlbs: Any) -> None:
    """The commands: report --type efficiency, plot --preset efficiency, compare --columns."""
    database = tmp_path / "results.db"
    with open_store(str(database)) as store:
        for batch, speed, watts in SWEEP:
            values = sweep_point(batch, speed, watts)
            params = {k: v for k, v in values.items() if k.startswith("exp.")}
            results = {k: v for k, v in values.items() if k.startswith("results.")}
            store.record_attempt(params["exp.id"], 1, params, "ok", results=results)
    report = dlbs("report", str(database), "--type", "efficiency", "--format", "json")
    assert report.returncode == 0, report.stderr
    rows = json.loads(report.stdout)["rows"]
    assert {row["replica_batch"]: row["samples_per_joule"] for row in rows} == {
        batch: pytest.approx(speed / watts) for batch, speed, watts in SWEEP}
    assert all(0 < row["mfu"] < 1 for row in rows)
    text = dlbs("report", str(database), "--type", "efficiency")
    assert text.returncode == 0 and "energy per sample (J)" in text.stdout
    plot = dlbs("plot", str(database), "--preset", "efficiency", "-o", str(tmp_path / "e.svg"))
    assert plot.returncode == 0, plot.stderr
    assert (tmp_path / "e.svg").read_text().count("<svg") == 1
    compared = dlbs("compare", str(database), str(database), "--columns",
                    "energy_per_sample_j,mfu", "--format", "csv")
    assert compared.returncode == 0, compared.stderr
    assert "energy_per_sample_j_change" in compared.stdout.splitlines()[0]
    html = dlbs("report", str(database), "--type", "efficiency", "--format", "html",
                "-o", str(tmp_path / "e.html"))
    assert html.returncode == 0, html.stderr
    assert "Throughput against the average power" in (tmp_path / "e.html").read_text()
