"""`dlbs parse` and `dlbs report` as a user runs them: exit codes, stdout, one-line errors."""

from __future__ import annotations

import csv
import io
import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_results import DATA, REPO, dlbs_cli, experiment, write_log

from dlbs.cli import main as cli_main
from dlbs.cli import report as report_cli
from dlbs.report.render import FORMATS
from dlbs.report.tables import REPORT_TYPES
from dlbs.results import efficiency, energy
from dlbs.results.stats import COMPUTED_KEYS
from dlbs.results.store import SCHEMA_VERSION, open_store

ENGINE_KEYS = {*COMPUTED_KEYS, *efficiency.COMPUTED_KEYS, *energy.COMPUTED_KEYS}


def _golden() -> dict[str, dict[str, Any]]:
    golden = {}
    for path in DATA.glob("*.expected.json"):
        log = str(path).replace(".expected.json", ".log")
        expected = json.loads(path.read_text())["experiment"]
        # The JSON written by parse turns NaN and Infinity into null.
        golden[log] = {key: (log if value == "@LOG@" else
                             None if isinstance(value, float) and not math.isfinite(value)
                             else value)
                       for key, value in expected.items()}
    return golden


def _one_line_error(result: subprocess.CompletedProcess[str], text: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("dlbs: error: ") and text in lines[0], result.stderr
    assert all(line.startswith("hint: ") for line in lines[1:]), result.stderr
    assert "Traceback" not in result.stderr


def _weak_logs(folder: Path) -> Path:
    for gpus, time_ms in ((1, 100.0), (2, 105.0), (4, 110.0), (8, 80.0)):
        values = experiment("resnet50", gpus, 32, time_ms)
        values["exp.log_file"] = f"resnet50_{gpus}.log"
        write_log(folder / "sweep" / f"resnet50_{gpus}.log", values)
    failed = experiment("resnet50", 16, 32, None, status="failure",
                        **{"results.status_msg": "CUDA out of memory"})
    write_log(folder / "sweep" / "more" / "resnet50_16.log", failed)
    (folder / "sweep" / "notes.txt").write_text("__results.time__=1\n")   # not *.log
    return folder / "sweep"


def test_parse_folder_prints_versioned_json(tmp_path: Path) -> None:
    result = dlbs_cli("parse", str(DATA))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["format"], document["version"]) == ("dlbs-experiments", 1)
    golden = _golden()
    found = {experiment["results.log_file"]: experiment
             for experiment in document["experiments"]}
    assert set(found) == set(golden)
    for log, expected in golden.items():
        # What the log says, except where the statistics engine computed its own value.
        got = found[log]
        assert {k: v for k, v in got.items() if k not in ENGINE_KEYS} == {
            k: v for k, v in expected.items() if k not in ENGINE_KEYS}, log
        samples = expected.get("results.time_data")
        if isinstance(samples, list) and samples and all(
                isinstance(t, int | float) and t >= 0 for t in samples):
            data = np.asarray(samples, dtype=float)
            assert got["results.stats_source"] == "dlbs"
            assert got["results.time"] == pytest.approx(data.mean(), rel=1e-12)
            assert got["results.time_std"] == pytest.approx(data.std(ddof=1), rel=1e-12)
            assert got["results.time_median"] == pytest.approx(np.median(data), rel=1e-12)
            assert got["results.time_p99"] == pytest.approx(np.percentile(data, 99), rel=1e-12)
            assert got["results.time_count"] == len(samples)
        else:
            assert got["results.stats_source"] == "backend", log
            for key in ("results.time", "results.time_std", "results.time_median"):
                assert got.get(key) == expected.get(key), (log, key)
    assert result.stderr == ("dlbs parse: 5 experiment(s) (1 failure, 4 ok); 5 protocol "
                             "line(s) with a value that is not JSON\n")


def test_parse_to_csv_atomically(tmp_path: Path) -> None:
    out = tmp_path / "out" / "parsed.csv"
    result = dlbs_cli("parse", str(DATA / "dlbs_pytorch_resnet50.log"),
                      str(DATA / "dlbs_era_tensorflow_ok.log"), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and f"written to {out}" in result.stderr
    assert [path.name for path in out.parent.iterdir()] == ["parsed.csv"]
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert list(rows[0])[:2] == ["exp.id", "exp.device_type"]
    assert [row["exp.model"] for row in rows] == ["resnet50", "alexnet_owt"]
    assert rows[0]["results.time_data"] == "[97.0,96.5,97.5,96.0,98.0]"
    assert rows[0]["exp.docker"] == "false" and rows[0]["exp.docker_args"] == ""
    assert rows[1]["results.time"] == "30.084" and rows[1]["results.mem_peak"] == ""


def test_parse_selected_keys(tmp_path: Path) -> None:
    result = dlbs_cli("parse", str(DATA / "dlbs_pytorch_resnet50.log"),
                      "--keys", "exp.model, results.time*")
    assert result.returncode == 0, result.stderr
    [parsed] = json.loads(result.stdout)["experiments"]
    assert set(parsed) == {"exp.model", "results.time", "results.time_data",
                           "results.time_std", "results.time_median", "results.time_p90",
                           "results.time_p95", "results.time_p99", "results.time_min",
                           "results.time_max", "results.time_count"}


@pytest.mark.parametrize(("arguments", "message"), [
    (["parse", "no/such.log"], "no such log, folder or results database: no/such.log"),
    (["parse", "{empty}"], "no *.log files under"),
    (["parse", str(DATA), "--keys", " , "], "--keys is empty"),
    (["report", "no/such.db"], "no such log, folder or results database: no/such.db"),
    (["report", "{bad_json}"], "is not a file written by `dlbs parse`"),
    (["report", "{newer_json}"], "has format version 99; this dlbs reads versions up to 1"),
    (["report", "{newer_db}"], f"has schema version {SCHEMA_VERSION + 1}"),
    (["report", "{foreign_db}"], "not a dlbs results database"),
    (["report", str(DATA), "-o", "{unwritable}"], "cannot write"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, arguments: list[str],
                                          message: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.json").write_text('{"experiments": []}')
    (tmp_path / "newer.json").write_text(
        '{"format": "dlbs-experiments", "version": 99, "experiments": []}')
    open_store(tmp_path / "newer.db").close()
    connection = sqlite3.connect(tmp_path / "newer.db")
    connection.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    connection.close()
    connection = sqlite3.connect(tmp_path / "foreign.db")
    connection.execute("CREATE TABLE t (x)")
    connection.close()
    (tmp_path / "file").write_text("")
    places = {"{empty}": tmp_path / "empty", "{bad_json}": tmp_path / "bad.json",
              "{newer_json}": tmp_path / "newer.json", "{newer_db}": tmp_path / "newer.db",
              "{foreign_db}": tmp_path / "foreign.db",
              "{unwritable}": tmp_path / "file" / "report.txt"}
    result = dlbs_cli(*[str(places.get(argument, argument)) for argument in arguments])
    _one_line_error(result, message)


def test_usage_errors_exit_2() -> None:
    result = dlbs_cli("report", str(DATA), "--format", "pdf")
    assert result.returncode == 2
    assert result.stderr.startswith("dlbs: error: argument --format: invalid choice: 'pdf'")
    result = dlbs_cli("parse")
    assert result.returncode == 2 and result.stderr.startswith("dlbs: error: ")


def test_report_weak_markdown_from_log_folder(tmp_path: Path) -> None:
    folder = _weak_logs(tmp_path)
    result = dlbs_cli("report", str(folder), "--type", "weak", "--format", "markdown")
    assert result.returncode == 0, result.stderr
    # The failed 16-GPU run makes no column: only ok experiments count. (Issue 23: numbers
    # to significant digits; they had 2 decimals.)
    assert "| resnet50 | 32 | 100 | 95.24 | 90.91 | 125 |\n" in result.stdout
    assert "| resnet50 | 32 | 320 | 609.5 | 1164 | 3200 |\n" in result.stdout
    assert "_Not counted (status not ok): 1 failure._" in result.stdout


def test_report_default_text_in_current_folder(tmp_path: Path) -> None:
    folder = _weak_logs(tmp_path)
    result = dlbs_cli("report", cwd=folder)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Regular report\n")
    assert "resnet50" in result.stdout and " 3200\n" in result.stdout   # issue 23: 3200.00


def test_report_from_database_and_logs_together(tmp_path: Path) -> None:
    database = tmp_path / "logs" / "results.db"
    with open_store(database) as store:
        for gpus, time_ms in ((1, 200.0), (2, 110.0)):
            params = experiment("alexnet_owt", gpus, 256 // gpus, None, status=None,
                                effective_batch=256)
            store.record_start(params["exp.id"], 1, params)
            store.record_end(params["exp.id"], 1, "ok", results={"results.time": time_ms})
        params = experiment("alexnet_owt", 4, 64, None, status=None, effective_batch=256)
        store.record_start(params["exp.id"], 1, params)
        store.record_end(params["exp.id"], 1, "timeout", status_msg="ran past 60 s")
    write_log(tmp_path / "extra" / "eight.log",
              experiment("alexnet_owt", 8, 32, 30.0, effective_batch=256))
    out = tmp_path / "report.json"
    result = dlbs_cli("report", str(database), str(tmp_path / "extra"), "--type", "strong",
                      "--format", "json", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    document = json.loads(out.read_text())
    rows = {row["gpus"]: row for row in document["rows"]}
    # Issue 23: exact (they were rounded: 1.82, 90.91, 6.67, 83.33).
    assert (rows[2]["speedup"], rows[2]["efficiency"]) == (200 / 110, 100 * 200 / 220)
    assert (rows[8]["speedup"], rows[8]["efficiency"]) == (200 / 30, 100 * 200 / 240)
    assert document["not_counted"] == {"timeout": 1}


def test_parse_output_feeds_report(tmp_path: Path) -> None:
    parsed = tmp_path / "parsed.json"
    assert dlbs_cli("parse", str(_weak_logs(tmp_path)), "-o", str(parsed)).returncode == 0
    result = dlbs_cli("report", str(parsed), "--type", "weak", "--format", "csv")
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    # Issue 23: exact values (they were rounded to 2 decimals).
    assert [(row["gpus"], row["efficiency"]) for row in rows] == [
        ("1", "100.0"), ("2", repr(100 * 100 / 105)), ("4", repr(100 * 100 / 110)),
        ("8", "125.0")]
    # CSV carries data only; what was left out is said on stderr.
    assert result.stderr == "dlbs report: Not counted (status not ok): 1 failure.\n"


def test_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _weak_logs(tmp_path)
    assert cli_main.main(["report", str(folder), "--type", "strong"]) == 0
    assert "Strong scaling (same effective batch)" in capsys.readouterr().out
    assert cli_main.main(["parse", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith("dlbs: error: no such log")


def test_cli_choices_match_the_library() -> None:
    assert report_cli.REPORT_TYPES == REPORT_TYPES
    assert report_cli.FORMATS == (*FORMATS, "html")   # html.py renders the page


def test_cli_modules_import_light() -> None:
    code = ("import sys, dlbs.cli.parse, dlbs.cli.report; "
            "heavy = {'rich', 'sqlite3', 'orjson'} & set(sys.modules); "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


def test_parse_skips_files_without_protocol_lines(tmp_path: Path) -> None:
    (tmp_path / "build.log").write_text("compiling...\ndone\n")
    write_log(tmp_path / "a" / "exp.log", experiment("resnet50", 1, 32, 100.0))
    result = dlbs_cli("parse", str(tmp_path))
    assert result.returncode == 0, result.stderr
    [parsed] = json.loads(result.stdout)["experiments"]
    assert parsed["results.log_file"] == str(tmp_path / "a" / "exp.log")
    assert result.stderr == ("dlbs parse: 1 experiment(s) (1 ok); 1 file(s) without protocol "
                             "lines ignored\n")


def test_parse_exports_a_database(tmp_path: Path) -> None:
    database = tmp_path / "results.db"
    with open_store(database) as store:
        params = experiment("resnet50", 1, 32, None, status=None)
        store.record_start("e1", 1, params, log_path="e1.log")
        store.record_end("e1", 1, "failure", status_msg="CUDA out of memory")
        store.record_start("e1", 2, params, log_path="e1.2.log")
        store.record_end("e1", 2, "ok", results={"results.time": 50.0})
        store.record_start("e2", 1, params, log_path="e2.log")     # still running
    result = dlbs_cli("parse", str(database), "--keys", "exp.id,results.status,results.time,"
                      "results.attempt,results.log_file")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["experiments"] == [
        {"exp.id": "e1", "results.time": 50.0, "results.status": "ok", "results.attempt": 2,
         "results.log_file": "e1.2.log"},
        {"exp.id": "e2", "results.status": "started", "results.attempt": 1,
         "results.log_file": "e2.log"},
    ]


def test_report_in_a_folder_without_logs(tmp_path: Path) -> None:
    result = dlbs_cli("report", cwd=tmp_path)
    _one_line_error(result, "no *.log files under .")
    assert result.stderr.splitlines()[1] == (
        "hint: name log files, folders that hold them, or a results database")
