"""`dlbs trace` as a user meets it: a run's log, its results database, formats, and errors."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlbs.cli.main import main
from dlbs.results.store import open_store
from dlbs.traces.reader import TraceFile
from tests.tracing.conftest import span, write_trace
from tests.tracing.trace_checks import check_operators, load

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


def test_negative_durations_are_left_out_and_said(tmp_path, dlbs_cli):
    path = write_trace(tmp_path / "neg.json.gz", [
        span("dlbs.step", "step", 0.0, 100.0, batch=0),
        span("dlbs.phase", "forward", 10.0, 50.0, batch=0),
        span("dlbs.phase", "backward", 60.0, -30.0, batch=0),
        {"ph": "B", "cat": "dlbs.phase", "name": "optimizer", "ts": 95.0, "pid": 1, "tid": 1},
        {"ph": "E", "ts": 90.0, "pid": 1, "tid": 1}])
    done = dlbs_cli("trace", str(path))
    assert done.returncode == 0, done.stderr
    assert ("note: 2 event(s) left out: a negative or non-finite duration or time (the "
            "first: event #2 ('backward'): ts 60, dur -30); the trace is damaged, or its "
            "clocks disagree") in done.stdout
    document = json.loads(dlbs_cli("trace", str(path), "--format", "json").stdout)
    assert any(note.startswith("2 event(s) left out") for note in document["notes"])


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
    (["{folder}"], "holds 0 traces"),
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


# -- folders (issue 23) ------------------------------------------------------------------------

def test_a_folder_of_several_traces_is_listed(runs, dlbs_cli):
    folder, logs = runs
    done = dlbs_cli("trace", str(folder))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"traces of {folder}"
    assert lines[1].split() == ["trace", "framework", "model", "phase", "device", "dtype",
                                "batch_size", "trace_level", "trace_batches"]
    listed = [line.split()[0] for line in lines[3:5]]
    # A path longer than the table's names (the machine's temporary folder) ends in "...".
    from dlbs.cli.trace import NAME_WIDTH

    assert listed == sorted(path if len(path) <= NAME_WIDTH else path[:NAME_WIDTH - 3] + "..."
                            for log in logs for path in [str(log).replace(".log",
                                                                          ".trace.json.gz")])
    assert {tuple(line.split()[1:]) for line in lines[3:5]} == {
        ("dummy", "resnet50", "training", "cpu", "float32", batch, "operator", "2")
        for batch in ("8", "16")}
    assert "note: 2 traces: name one" in lines[5]
    as_json = json.loads(dlbs_cli("trace", str(folder), "--format", "json").stdout)
    assert as_json["view"] == "traces" and len(as_json["rows"]) == 2
    # --id picks an experiment of the folder's results database.
    exp_id = logs[0].stem.rsplit("_", 1)[1]
    by_id = dlbs_cli("trace", str(folder), "--id", exp_id, "--view", "layers", "--format",
                     "json")
    assert by_id.returncode == 0, by_id.stderr
    from_log = dlbs_cli("trace", str(logs[0]), "--view", "layers", "--format", "json")
    assert json.loads(by_id.stdout)["rows"] == json.loads(from_log.stdout)["rows"]


def test_a_folder_of_one_trace_shows_it(runs, dlbs_cli, tmp_path):
    _, logs = runs
    trace = str(logs[0]).replace(".log", ".trace.json.gz")
    nested = tmp_path / "one" / "deeper"
    nested.mkdir(parents=True)
    (nested / "only.trace.json.gz").write_bytes(Path(trace).read_bytes())
    (tmp_path / "one" / "notes.json").write_text("{}")  # not a trace by its name
    shown = dlbs_cli("trace", str(tmp_path / "one"), "--view", "operators")
    direct = dlbs_cli("trace", trace, "--view", "operators")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == (f"operators of {tmp_path / 'one'}: "
                                            f"{nested / 'only.trace.json.gz'} (2 traced steps)")
    assert shown.stdout.splitlines()[1:] == direct.stdout.splitlines()[1:]
    # Two sources compare; a folder of several traces cannot be one of them.
    lines = error_lines(dlbs_cli("trace", str(runs[0]), trace))
    assert "holds 2 traces" in lines[0]


def test_a_traced_rerun_of_a_recorded_experiment_is_one_flag_and_said(tmp_path):
    folder = tmp_path / "logs"
    common = [*DUMMY, "-P", f"exp.log_dir={folder}"]
    assert main(["run", *common]) == 0
    traced = [*common, "-P", "exp.trace_level=operator"]
    said = subprocess.run([sys.executable, "-m", "dlbs.cli.main", "run", *traced],
                          capture_output=True, text=True, timeout=120)
    assert said.returncode == 0, said.stderr
    assert "unchanged" in said.stderr
    assert ("dlbs: warning: 1 experiment with exp.trace_level operator is already recorded "
            "and not run again (exp.rerun is never), so not traced: a trace is taken by a run; "
            "add -P exp.rerun=always to run it again with the trace (the id stays the same)"
            ) in said.stderr
    assert not list(folder.glob("*.trace.json.gz"))
    dry = subprocess.run([sys.executable, "-m", "dlbs.cli.main", "run", *traced, "--dry-run"],
                         capture_output=True, text=True, timeout=120)
    assert "so not traced" in dry.stderr
    assert main(["run", *traced, "-P", "exp.rerun=always"]) == 0
    assert len(list(folder.glob("*.trace.json.gz"))) == 1
    again = subprocess.run([sys.executable, "-m", "dlbs.cli.main", "run", *traced],
                           capture_output=True, text=True, timeout=120)
    assert "unchanged" in again.stderr and "not traced" not in again.stderr  # it has its trace


@pytest.mark.pytorch
@pytest.mark.slow
def test_operators_of_a_real_pytorch_trace(tmp_path, dlbs_cli):
    folder = tmp_path / "logs"
    assert main(["run", "-P", "exp.model=deep_mnist", "-P", "exp.replica_batch=4",
                 "-P", "exp.num_batches=1", "-P", "exp.num_warmup_batches=0",
                 "-P", "pytorch.num_threads=1", "-P", f"exp.log_dir={folder}",
                 "-P", "exp.trace_level=full", "-P", "exp.trace_batches=2"]) == 0
    (trace,) = folder.glob("*.trace.json.gz")
    check_operators(TraceFile(trace), load(trace))
    done = dlbs_cli("trace", str(folder), "--view", "operators", "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = {row["operator"]: row for row in json.loads(done.stdout)["rows"]}
    assert {"aten::linear", "aten::addmm"} <= set(rows)
    assert rows["aten::linear"]["self_ms"] < rows["aten::linear"]["total_ms"]  # calls addmm
    assert any(shape.startswith("4x") for shape in rows["aten::linear"]["shapes"].split("; "))
    assert rows["aten::linear"]["calls"] % 2 == 0  # the same layers in each traced step
