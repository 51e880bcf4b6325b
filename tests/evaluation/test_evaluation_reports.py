"""`dlbs report --type latency` and `--type accuracy` over a sweep of scenarios."""

from __future__ import annotations

import csv
import io
import json

import pytest


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Logs of a dummy sweep: scenario x batch, two server rates, accuracy, benchmark."""
    import subprocess
    import sys


    folder = tmp_path_factory.mktemp("reports")
    common = ["-P", "exp.framework=dummy", "-P", "dummy.sleep=0.005",
              "-P", "exp.min_duration_s=0.3", "-P", "exp.min_query_count=10",
              "-P", "exp.num_samples=40", "-P", "exp.latency_bound_ms=200"]
    runs = [
        ["-V", 'exp.scenario=["single_stream", "offline", "benchmark"]',
         "-V", "exp.replica_batch=[2, 4]"],
        ["-P", "exp.scenario=server", "-V", "exp.target_qps=[20, 40]", "-P",
         "exp.replica_batch=4"],
        ["-P", "exp.scenario=accuracy", "-P", "exp.replica_batch=4"],
    ]
    for extra in runs:
        done = subprocess.run([sys.executable, "-m", "dlbs.cli.main", "run", *common, *extra],
                              cwd=folder, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    return folder


def report(dlbs_cli, folder, *args):
    result = dlbs_cli("report", "logs", *args, cwd=folder)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_latency_rows_and_columns(dlbs_cli, sweep):
    rows = list(csv.DictReader(io.StringIO(report(dlbs_cli, sweep, "--type", "latency",
                                                  "--format", "csv"))))
    scenarios = sorted((row["scenario"], row["replica_batch"], row.get("exp.target_qps", ""))
                       for row in rows)
    # single_stream and offline at batches 2 and 4, server at two rates: the rate that
    # varies is a row key too; benchmark and accuracy are not latency experiments.
    assert [s[:2] for s in scenarios] == [("offline", "2"), ("offline", "4"),
                                          ("server", "4"), ("server", "4"),
                                          ("single_stream", "2"), ("single_stream", "4")]
    assert {s[2] for s in scenarios if s[0] == "server"} == {"20.0", "40.0"}
    for row in rows:
        assert float(row["latency_p50"]) <= float(row["latency_p99"])
        assert float(row["qps"]) > 0
        if row["scenario"] == "server":
            assert row["latency_bound_met"] == "true"
            assert row["target_qps"] in ("20.0", "40.0")
        else:
            assert row["latency_bound_met"] == "" and row["target_qps"] == ""
    assert {"model", "framework", "latency_p90", "max_qps"} <= set(rows[0])


def test_latency_text_names_what_it_leaves_out(dlbs_cli, sweep):
    text = report(dlbs_cli, sweep, "--type", "latency")
    assert text.startswith("Latency report")
    assert "latency p50 (ms)" in text and "bound met" in text
    assert "Not shown: 3 attempt(s) of other scenarios" in text


def test_accuracy_report(dlbs_cli, sweep):
    (row,) = json.loads(report(dlbs_cli, sweep, "--type", "accuracy", "--format",
                               "json"))["rows"]
    assert (row["top1"], row["top5"], row["num_samples"]) == (0.75, 1.0, 40)
    assert row["model"] == "resnet50" and "weights" in row


def test_top5_of_a_model_of_five_classes_or_fewer_is_not_reported_but_said(dlbs_cli, tmp_path):
    """Every class is among the five best: top-5 would be 1 whatever the model predicts."""
    done = dlbs_cli("run", "-P", "exp.framework=dummy", "-P", "dummy.sleep=0", "-P",
                    "exp.scenario=accuracy", "-P", "exp.num_samples=40", "-V",
                    "exp.num_classes=[4, 10]", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    why = ("the model has 4 classes, all among its 5 best: top-5 would be 1 whatever it "
           "predicts")
    for source in ("logs", "logs/results.db"):
        rows = json.loads(report(dlbs_cli, tmp_path, "--type", "accuracy", "--format", "json")
                          if source == "logs" else dlbs_cli("report", source, "--type",
                          "accuracy", "--format", "json", cwd=tmp_path).stdout)["rows"]
        four, ten = sorted(rows, key=lambda row: row["exp.num_classes"])
        assert (four["top1"], four["top5"], four["notes"]) == (
            0.75, None, [f"top-5 not reported: {why}"])
        assert (ten["top1"], ten["top5"], ten["notes"]) == (0.75, 1.0, [])
    text = report(dlbs_cli, tmp_path, "--type", "accuracy")
    assert f"top-5 not reported: {why}" in text


def test_regular_report_shows_every_experiment_with_a_throughput(dlbs_cli, sweep):
    # The scenarios print their QPS as results.throughput; accuracy has none.
    text = report(dlbs_cli, sweep, "--type", "regular", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert sorted(row["scenario"] for row in rows) == [
        "benchmark", "benchmark", "offline", "offline", "server", "server", "single_stream",
        "single_stream"]
