"""`dlbs trace` as a user meets it: a run's log, its results database, formats, and errors."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os

import pytest

from dlbs.cli.main import main
from dlbs.results.store import open_store
from tests.tracing.conftest import span, write_trace

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=3", "-P", "dummy.sleep=0.002",
         "-P", "exp.num_warmup_batches=0"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two dummy experiments traced at operator level, in one results database."""
    folder = tmp_path_factory.mktemp("runs")
    done = main(["run", *DUMMY, "-P", f"exp.log_dir={folder}", "-P",
                 "exp.trace_level=operator", "-P", "exp.trace_batches=2",
                 "-V", "exp.replica_batch=[8, 16]"])
    assert done == 0
    logs = sorted(folder.glob("*.log"))
    assert len(logs) == 2
    return folder, logs


def error_lines(done) -> list[str]:
    """What a failed `dlbs trace` printed: one error line, perhaps a hint, no traceback."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("dlbs: error: ")
    assert all(line.startswith("hint: ") for line in lines[1:])
    return lines


def test_a_run_writes_its_trace_beside_the_log_and_into_the_store(runs):
    folder, logs = runs
    traces = {str(folder / log.name.replace(".log", ".trace.json.gz")) for log in logs}
    assert all(os.path.isfile(trace) for trace in traces)
    with open_store(folder / "results.db", create=False) as store:
        attempts = store.attempts()
    assert {a.results["results.trace_file"] for a in attempts} == traces
    assert {a.status for a in attempts} == {"ok"}


def test_the_log_the_database_and_the_file_give_the_same_table(runs, dlbs_cli):
    folder, logs = runs
    exp_id = logs[0].stem.rsplit("_", 1)[1]
    from_log = dlbs_cli("trace", str(logs[0]), "--view", "layers", "--format", "json")
    from_db = dlbs_cli("trace", str(folder / "results.db"), "--id", exp_id, "--view", "layers",
                       "--format", "json")
    trace = str(logs[0]).replace(".log", ".trace.json.gz")
    from_file = dlbs_cli("trace", trace, "--view", "layers", "--format", "json")
    tables = [json.loads(done.stdout) for done in (from_log, from_db, from_file)]
    assert tables[0]["rows"] == tables[1]["rows"] == tables[2]["rows"]
    assert {row["layer"] for row in tables[0]["rows"]} >= {"resnet50", "layer1", "fc"}


def test_two_experiments_of_one_database_compare(runs, dlbs_cli):
    folder, logs = runs
    ids = [log.stem.rsplit("_", 1)[1] for log in logs]
    done = dlbs_cli("trace", str(folder / "results.db"), "--id", ids[0], "--id", ids[1],
                    "--view", "summary")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].split() == ["category", "a_per_step_ms",
                                                   "b_per_step_ms", "ratio"]
    assert "ratio = b / a of per_step_ms" in done.stdout


def test_formats_and_an_output_file(runs, dlbs_cli, tmp_path):
    _, logs = runs
    as_csv = dlbs_cli("trace", str(logs[0]), "--view", "kernels", "--format", "csv")
    assert as_csv.returncode == 0
    assert next(csv.reader(io.StringIO(as_csv.stdout)))[:2] == ["layer", "kernel"]
    assert "no kernels traced" in as_csv.stderr  # the note still reaches the user
    target = tmp_path / "out" / "tree.json"
    done = dlbs_cli("trace", str(logs[0]), "--view", "layer_tree", "--format", "json", "-o",
                    str(target))
    assert done.returncode == 0 and done.stdout == ""
    document = json.loads(target.read_text())
    assert document["view"] == "layer_tree" and document["rows"][0]["depth"] == 0
    table = dlbs_cli("trace", str(logs[0]), "--view", "layer_tree", "--top", "3")
    assert table.stdout.splitlines()[4].startswith("  conv1")  # indented by depth
    assert len(table.stdout.splitlines()) == 2 + 3 + 1


def test_eventflow_says_what_it_left_out(runs, dlbs_cli):
    _, logs = runs
    done = dlbs_cli("trace", str(logs[0]), "--view", "eventflow", "--top", "5")
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == 1 + 2 + 5 + 1
    assert "note: the first 5 of" in done.stdout


def test_a_database_with_several_traces_needs_an_id(runs, dlbs_cli):
    folder, _ = runs
    lines = error_lines(dlbs_cli("trace", str(folder / "results.db")))
    assert "2 experiments have traces" in lines[0] and "--id" in lines[1]


@pytest.mark.parametrize("content, message", [
    (b"this is not a trace", "names no trace file"),  # read as a log
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}', "malformed JSON"),
    (b'{"traceEvents": [1, 2]}', "event #0 is not a JSON object"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": "soon", "dur": 2}]}',
     "has no numeric 'ts'"),
    (b'{"otherEvents": []}', "no traceEvents array"),
    (b'[{"ph": "X", "name": "a", "ts": 1, "dur": null}]', "has no numeric 'dur'"),
    (b"{]", "malformed JSON"),
])
def test_a_malformed_trace_is_one_error_line(tmp_path, dlbs_cli, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    lines = error_lines(dlbs_cli("trace", str(path)))
    assert message in lines[0]


def test_a_cut_gzip_trace_is_one_error_line(tmp_path, dlbs_cli):
    whole = write_trace(tmp_path / "whole.json.gz",
                        [span("dlbs.step", "step", float(i), 1.0) for i in range(5000)])
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(whole.read_bytes()[:2000])
    lines = error_lines(dlbs_cli("trace", str(cut)))
    assert "cut.json.gz is not a valid Chrome trace" in lines[0]
    garbage = tmp_path / "garbage.json.gz"
    garbage.write_bytes(gzip.compress(b"not json at all")[:10] + b"\x00" * 50)
    assert "is not a" in error_lines(dlbs_cli("trace", str(garbage)))[0]


@pytest.mark.parametrize("arguments, message", [
    (["{missing}"], "no such file"),
    (["{folder}"], "is a folder"),
    (["{trace}", "--id", "abc"], "is not a results database"),
    (["{trace}", "{trace}", "{trace}"], "reads one trace, or two to compare"),
    (["{trace}", "--top", "-1"], "expected a count"),
    (["{trace}", "--view", "summary", "--sort", "mean"], "--sort applies to"),
    (["{trace}", "{trace}", "--view", "eventflow"], "compare in the"),
])
def test_bad_arguments_are_one_error_line(tmp_path, dlbs_cli, arguments, message):
    trace = write_trace(tmp_path / "t.json.gz", [span("dlbs.step", "step", 0.0, 1.0)])
    names = {"missing": str(tmp_path / "nope.json.gz"), "folder": str(tmp_path),
             "trace": str(trace)}
    lines = error_lines(dlbs_cli("trace", *(a.format(**names) for a in arguments)))
    assert message in lines[0]


def test_a_log_or_database_without_a_trace_says_so(tmp_path, dlbs_cli):
    assert main(["run", *DUMMY, "-P", f"exp.log_dir={tmp_path}"]) == 0
    log = next(tmp_path.glob("*.log"))
    assert "names no trace file" in error_lines(dlbs_cli("trace", str(log)))[0]
    lines = error_lines(dlbs_cli("trace", str(tmp_path / "results.db")))
    assert "0 experiments have traces" in lines[0]
    exp_id = log.stem.rsplit("_", 1)[1]
    lines = error_lines(dlbs_cli("trace", str(tmp_path / "results.db"), "--id", exp_id))
    assert f"experiment {exp_id}" in lines[0] and "has no trace" in lines[0]
    lines = error_lines(dlbs_cli("trace", str(tmp_path / "results.db"), "--id", "nope"))
    assert "holds no experiment nope" in lines[0]


def test_a_trace_deleted_after_the_run_is_named(runs, dlbs_cli, tmp_path):
    folder, logs = runs
    copy = tmp_path / "copy.log"
    text = logs[0].read_text().replace(str(folder), str(tmp_path / "gone"))
    copy.write_text(text)
    lines = error_lines(dlbs_cli("trace", str(copy)))
    assert "does not exist" in lines[0] and "gone" in lines[0]


def test_long_kernel_names_are_cut_in_tables_only(tmp_path, dlbs_cli):
    name = "void cutlass::Kernel<" + "x" * 300 + ">"
    trace = write_trace(tmp_path / "t.json.gz", [
        span("dlbs.step", "step", 0.0, 10.0),
        span("kernel", name, 1.0, 2.0, **{"dlbs.layer": "conv1"})])
    table = dlbs_cli("trace", str(trace), "--view", "kernels")
    assert name not in table.stdout and name[:60] in table.stdout and "..." in table.stdout
    whole = dlbs_cli("trace", str(trace), "--view", "kernels", "--format", "json")
    assert json.loads(whole.stdout)["rows"][0]["kernel"] == name
