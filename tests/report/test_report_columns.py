"""Reports and comparisons over columns agree with the attempts they read.

A database and the logs of the same attempts give the same report, in every format; numbers
are written as Python writes them.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlbs.report import Options, build_report, render
from dlbs.report.compare import compare
from dlbs.report.render_compare import render_comparison
from dlbs.results.sources import load_attempts
from dlbs.results.store import open_store
from tests.report.conftest import records
from tests.results.helpers_results import experiment, write_log

EXPERIMENT = st.fixed_dictionaries({
    "model": st.sampled_from(["resnet50", "vgg16", "resnet101"]),
    "gpus": st.sampled_from([1, 2, 4]),
    "batch": st.sampled_from([16, 32]),
    "trial": st.sampled_from([None, 1, 2, "x", [1]]),
    "status": st.sampled_from(["ok", "ok", "ok", "failure"]),
    "samples": st.lists(st.floats(5.0, 200.0), min_size=1, max_size=12),
    "attempt": st.integers(0, 2),
})


def _write(folder: Path, items: list[dict[str, Any]]) -> tuple[Path, Path]:
    """The same attempts as log files and as a results database."""
    logs = folder / "logs"
    database = folder / "results.db"
    numbers: dict[str, int] = {}
    with open_store(database) as store:
        for index, item in enumerate(items):
            exp_id = f"{item['model']}-{item['gpus']}-{item['batch']}-{item['attempt']}"
            numbers[exp_id] = number = numbers.get(exp_id, 0) + 1
            params = {key: value for key, value in experiment(
                item["model"], item["gpus"], item["batch"], None, status=None,
                exp_id=exp_id).items()}
            if item["trial"] is not None:
                params["trial"] = item["trial"]
            ended = f"2026-01-01T10:{index // 60:02d}:{index % 60:02d}+00:00"
            results = {"results.status": item["status"], "results.end_time": ended}
            if item["status"] == "ok":
                results["results.time_data"] = item["samples"]
            # Named so that the folder is read in the order the database was written.
            log = write_log(logs / f"{index:03d}-{exp_id}.{number}.log", {**params, **results})
            store.record_attempt(exp_id, number, params, item["status"], results=results,
                                 at=ended, log_path=str(log))
    return logs, database


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(EXPERIMENT, min_size=1, max_size=12),
       st.sampled_from(["regular", "weak", "strong"]), st.booleans())
def test_a_database_and_its_logs_give_one_report(tmp_path_factory: pytest.TempPathFactory,
                                                 items: list[dict[str, Any]], kind: str,
                                                 latest: bool) -> None:
    logs, database = _write(tmp_path_factory.mktemp("agree"), items)
    options = Options(kind=kind, latest=latest)
    from_logs = build_report(load_attempts([logs]), options)
    from_database = build_report(load_attempts([database]), options)
    for fmt in ("text", "markdown", "csv", "json"):
        assert render(from_logs, fmt) == render(from_database, fmt), fmt
    # Read twice (a log and the database of one attempt), every attempt counts once.
    both = build_report(load_attempts([logs, database]), options)
    assert both.duplicates == len(items)
    assert json.loads(render(both, "json"))["rows"] == json.loads(
        render(from_database, "json"))["rows"]


def test_a_comparison_of_databases_equals_one_of_logs(tmp_path: Path) -> None:
    base = [{"model": m, "gpus": 1, "batch": 32, "trial": None, "status": "ok",
             "samples": [100.0 + i % 7 for i in range(30)], "attempt": 0}
            for m in ("resnet50", "vgg16")]
    new = [dict(base[0], samples=[112.0 + i % 7 for i in range(30)]),
           dict(base[1], status="failure")]
    base_logs, base_db = _write(tmp_path / "base", base)
    new_logs, new_db = _write(tmp_path / "new", new)
    from_logs = compare(load_attempts([base_logs], latest_only=True),
                        load_attempts([new_logs], latest_only=True))
    from_databases = compare(load_attempts([base_db], latest_only=True),
                             load_attempts([new_db], latest_only=True))
    for fmt in ("text", "markdown", "csv", "json"):
        assert render_comparison(from_logs, fmt) == render_comparison(from_databases, fmt)
    assert sorted(match.verdict for match in from_databases.matches) == ["now fails", "slower"]
    assert from_databases.regression_count == 2


@given(st.lists(st.one_of(st.floats(0.001, 1e9), st.floats(1e12, 1e17), st.integers(1, 10**6),
                          st.sampled_from([0.005, 0.015, 2.675, 1.005, 0.125, 1e15 + 0.25])),
                min_size=1, max_size=20))
def test_numbers_are_written_exactly_as_stored(times: list[float]) -> None:
    # Issue 23: CSV and JSON carry the stored value exactly (they were rounded to 2
    # decimals), an integer as an integer.
    items = records(*[experiment("resnet50", 1, index + 1, time, exp_id=f"e{index}")
                      for index, time in enumerate(times)])
    report = build_report(items, Options(columns=["time"]))
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    written = {int(row["replica_batch"]): row["time_ms"] for row in rows}
    document = {row["replica_batch"]: row["time_ms"] for row in json.loads(
        render(report, "json"))["rows"]}
    for index, time in enumerate(times):
        assert written[index + 1] == repr(time)
        assert document[index + 1] == time and type(document[index + 1]) is type(time)
