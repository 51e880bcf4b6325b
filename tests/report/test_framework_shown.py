"""Issue 33, item 6: a report whose rows come from different frameworks shows the framework.

A dummy row at 3,091 inst/s read like a PyTorch number: `dummy.sleep` (or the model) told the
rows apart, so the framework was no row key. Whatever tells rows apart, the framework is a
column when the rows' frameworks differ, in every kind and with `--by`.
"""

from __future__ import annotations

import pytest

from dlbs.report import Options, build_report, render
from tests.report.conftest import records


def _experiment(framework: str, model: str, gpus: int, time_ms: float, **extra) -> dict:
    return {"exp.id": f"{framework}-{model}-{gpus}-{sorted(extra.items())}",
            "exp.framework": framework, "exp.model": model, "exp.replica_batch": 16,
            "exp.effective_batch": 16 * gpus, "exp.num_gpus": gpus, "exp.device_type": "gpu",
            "results.time": time_ms, "results.status": "ok", **extra}


MIXED = [_experiment("pytorch", "resnet18", gpus, 10.0) for gpus in (1, 2)] + \
    [_experiment("dummy", "vgg16", gpus, 5.2, **{"dummy.sleep": 0.005}) for gpus in (1, 2)]


@pytest.mark.parametrize("options", [
    Options(kind="regular"), Options(kind="regular", by=["exp.model", "exp.num_gpus"]),
    Options(kind="weak"), Options(kind="strong"),
    Options(kind="pivot", rows=["exp.model"], cols="exp.num_gpus", value="results.time"),
])
def test_rows_of_different_frameworks_name_theirs(options: Options) -> None:
    report = build_report(records(*MIXED), options)
    assert "exp.framework" in report.row_keys, report.row_keys
    text = render(report, "text")
    assert "framework" in text and "dummy" in text and "pytorch" in text
    csv_header = render(report, "csv").splitlines()[0].split(",")
    assert "framework" in csv_header


def test_one_framework_is_said_once_above_the_rows() -> None:
    report = build_report(records(*MIXED[:2]), Options(kind="regular"))
    assert "exp.framework" not in report.row_keys
    assert "framework pytorch" in render(report, "text").splitlines()[1]


def test_a_framework_axis_is_not_repeated_as_a_row_key() -> None:
    same_model = [_experiment(framework, "resnet18", 1, t, **extra) for framework, t, extra in
                  (("pytorch", 10.0, {}), ("dummy", 5.0, {"dummy.sleep": 0.005}))]
    report = build_report(records(*same_model), Options(
        kind="pivot", rows=["exp.model"], cols="exp.framework", value="results.time"))
    assert report.row_keys == ["exp.model"] and report.column_key == "exp.framework"
