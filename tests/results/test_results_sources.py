"""Gathering experiments from logs, folders, databases and parse output."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers_results import experiment, write_log

from dlbs.errors import ResultsError
from dlbs.results.sources import (
    experiments_document,
    find_logs,
    latest_per_id,
    load_experiments,
)
from dlbs.results.store import open_store


def test_find_logs_is_recursive_and_sorted(tmp_path: Path) -> None:
    for name in ("b/2.log", "a/1.log", "a/z/3.log", "c.txt", "a/4.log.gz"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert [os.path.relpath(p, tmp_path) for p in find_logs(str(tmp_path))] == [
        "a/1.log", "a/z/3.log", "b/2.log"]


def test_end_time_decides_between_logs_of_one_experiment(tmp_path: Path) -> None:
    older = write_log(tmp_path / "x.log", experiment(
        "resnet50", 1, 32, 150.0, exp_id="x", end_time="2026-01-01T10:00:00+00:00"))
    newer = write_log(tmp_path / "x.2.log", experiment(
        "resnet50", 1, 32, 125.0, exp_id="x", end_time="2026-01-01T09:00:00-02:00"))
    # The log that ended first is the newer file on disk and is read last (x.2 < x in
    # sort order): end times (compared in UTC), not mtimes or order, decide.
    os.utime(older, (2_000_000_000, 2_000_000_000))
    kept, dropped = latest_per_id(load_experiments([tmp_path]).records)
    assert dropped == 1 and [r.source for r in kept] == [str(newer)]


def test_mtime_decides_without_end_times(tmp_path: Path) -> None:
    first = write_log(tmp_path / "a.log", experiment("resnet50", 1, 32, 150.0, exp_id="x"))
    second = write_log(tmp_path / "b.log", experiment("resnet50", 1, 32, 125.0, exp_id="x"))
    os.utime(first, (2_000_000_000, 2_000_000_000))
    os.utime(second, (1_000_000_000, 1_000_000_000))
    kept, _ = latest_per_id(load_experiments([tmp_path]).records)
    assert [r.experiment["results.time"] for r in kept] == [150.0]


def test_database_and_parse_output_and_logs_mix(tmp_path: Path) -> None:
    with open_store(tmp_path / "results.db") as store:
        store.record_start("db", 1, {"exp.model": "vgg16"})
        store.record_end("db", 1, "ok", results={"results.time": 1.0})
    (tmp_path / "parsed.json").write_text(json.dumps(experiments_document(
        [experiment("resnet18", 1, 8, 5.0, exp_id="json")])))
    write_log(tmp_path / "logs" / "one.log", experiment("resnet50", 1, 8, 5.0, exp_id="log"))
    loaded = load_experiments([tmp_path / "results.db", tmp_path / "parsed.json",
                               tmp_path / "logs"])
    assert [e["exp.id"] for e in loaded.experiments] == ["db", "json", "log"]
    assert loaded.logs_read == 1


@pytest.mark.parametrize(("content", "message"), [
    ("not json", "is not valid JSON"),
    ('[{"exp.id": 1}]', "is not a file written by `dlbs parse`"),
    ('{"format": "dlbs-experiments", "version": "1", "experiments": []}', "format version '1'"),
    ('{"format": "dlbs-experiments", "version": 1, "experiments": [1]}', "list of objects"),
])
def test_bad_parse_output(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "x.json").write_text(content)
    with pytest.raises(ResultsError, match=message):
        load_experiments([tmp_path / "x.json"])
