"""`dlbs report FOLDER` reads the folder's results database (issue 23, item 4)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from dlbs.report import build_report, render
from dlbs.report.html import render_html
from dlbs.report.inputs import load_inputs
from tests.report.conftest import dummy_run
from tests.results.helpers_results import experiment, write_log


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One log folder, two sweeps of the dummy backend (two dates in the environment)."""
    folder = tmp_path_factory.mktemp("inputs") / "logs"
    for model in ("resnet50", "vgg16"):
        result = dummy_run(folder, "-P", f"exp.model={model}", "-P", "exp.num_batches=3",
                           "-P", "dummy.sleep=0.001")
        assert result.returncode == 0, result.stderr
    return folder


@pytest.mark.slow
def test_a_folder_is_read_through_its_database(two_sweeps: Path, dlbs: Any) -> None:
    # Before: the folder's logs only, so no device model and an HTML page that said the
    # inputs were logs.
    attempts = load_inputs([two_sweeps])
    assert attempts.size == 2 and attempts.has_key("env.cpu_model")
    report = build_report(attempts, "regular")
    assert report.duplicates == 0
    assert any(key == "env.device_model" for key, _ in report.constants)
    result = dlbs("report", str(two_sweeps), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert "env.device_model" in json.loads(result.stdout)["constants"]
    page = render_html(report)
    assert "inputs were logs" not in page


@pytest.mark.slow
def test_logs_the_database_does_not_hold_are_read_too(two_sweeps: Path,
                                                      tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    shutil.copytree(two_sweeps, folder)
    write_log(folder / "copied_in.log", experiment("alexnet_owt", 1, 8, 12.0, exp_id="cp"))
    report = build_report(load_inputs([folder]), "regular")
    assert sorted(row["model"] for row in report.records()) == [
        "alexnet_owt", "resnet50", "vgg16"]
    assert report.duplicates == 0


def test_a_folder_without_a_database_is_read_from_its_logs(tmp_path: Path) -> None:
    write_log(tmp_path / "a.log", experiment("resnet50", 1, 32, 100.0))
    [row] = build_report(load_inputs([tmp_path]), "regular").records()
    assert row["time_ms"] == 100.0


@pytest.mark.slow
def test_the_environment_table_has_no_two_rows_alike(two_sweeps: Path) -> None:
    # Two sweeps differ in env.date, which the table does not show: one row, 2 experiments.
    page = render_html(build_report(load_inputs([two_sweeps]), "regular"))
    environment = page.split('<section id="environment">', 1)[1].split("</section>", 1)[0]
    rows = [row for row in environment.split("<tr>")[2:]]
    assert len(rows) == 1 and '<td class="num">2</td>' in rows[0]
    assert "resnet50, vgg16" in rows[0]
    assert "Regular report" in render(build_report(load_inputs([two_sweeps]), "regular"),
                                      "text")
