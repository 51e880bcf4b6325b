"""Issue 34 for the results store, copies, parse and what rows and backend output may do.

Each test reproduces one class of the issue (its item number in the test's name) with the
example and the variants around it: a user's command as a subprocess where hanging is the
defect, in-process otherwise.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from tests.cli.test_plan_cli import assert_one_error_line

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=2", "-P", "exp.num_warmup_batches=0"]


@pytest.fixture(params=["fifo", "device", "socket"])
def special(request, tmp_path: Path):
    """A path that is not a regular file: a FIFO with no writer, a device, a socket."""
    if request.param == "fifo":
        path = tmp_path / "store.db"
        os.mkfifo(path)
        yield str(path)
    elif request.param == "device":
        yield "/dev/zero"
    else:
        import socket

        path = tmp_path / "store.sock"
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(path))
            yield str(path)


# -- 13: a FIFO (or any file that is not regular) as a store -----------------------------------
@pytest.mark.parametrize("command", [
    ["results", "copy", "{src}", "{tmp}/dst.db"],
    ["trace", "{src}", "--id", "X"],
    ["trace", "{src}"],
    ["trace", "{tmp}/dst.db", "{src}"],
])
def test_13_a_store_that_is_no_regular_file_is_refused_at_once(dlbs_cli, tmp_path, special,
                                                                command):
    source = special
    argv = [part.format(src=source, tmp=tmp_path) for part in command]
    result = dlbs_cli(*argv, cwd=tmp_path, timeout=60)
    assert_one_error_line(result, f"cannot read {source}: it is a", "not a regular file")


def test_13_a_fifo_named_results_db_in_a_folder_is_no_database(dlbs_cli, tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    os.mkfifo(folder / "results.db")
    for argv in (["trace", str(folder), "--id", "X"], ["results", "copy", str(folder),
                                                      str(tmp_path / "dst.db")]):
        result = dlbs_cli(*argv, cwd=tmp_path, timeout=60)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr


def test_13_the_reading_helpers_never_wait_on_a_fifo(tmp_path):
    from dlbs.results.store import is_store
    from dlbs.util.regular_files import head, special_kind

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    assert not is_store(fifo)
    assert special_kind(fifo) == "a FIFO" and special_kind(tmp_path) is None
    with pytest.raises(OSError):
        head(fifo, 16)


# -- 16, first bullet: the store's credentials never reach a benchmark's environment -----------
SECRETS = {"PGPASSWORD": "s3cret-pw", "PGPASSFILE": "/home/me/.pgpass-s3cret",
           "PGSERVICEFILE": "/home/me/.pg_service-s3cret", "PGSSLKEY": "/home/me/s3cret.key",
           "DATABASE_URL": "postgresql://me:s3cret-url@db/bench"}


def test_16_the_benchmark_environment_has_no_store_credentials():
    from dlbs.util.credentials import benchmark_environment

    inherited = benchmark_environment({**SECRETS, "PATH": "/bin", "pgpassword": "x",
                                       "OTHER": "https://b:c@d/x", "URL": "https://d/x"})
    assert "s3cret" not in repr(inherited)
    assert inherited == {"PATH": "/bin", "DATABASE_URL": "postgresql://me@db/bench",
                         "OTHER": "https://b@d/x", "URL": "https://d/x"}


def _dumped(path: Path) -> str:
    assert path.is_file(), "the launcher did not run"
    return path.read_text()


def test_16_a_local_run_and_predict_inherit_no_credentials(dlbs_cli, tmp_path):
    dump = tmp_path / "env.txt"
    launcher = f"runtime.launcher=sh -c 'env > {dump}; exec \"$@\"' launcher"
    run = dlbs_cli("run", *DUMMY, "-P", launcher, "-P", "runtime.env.KEPT=yes", cwd=tmp_path,
                   env=SECRETS)
    assert run.returncode == 0, run.stderr
    seen = _dumped(dump)
    assert "KEPT=yes" in seen
    assert "s3cret" not in seen and "PGPASSWORD" not in seen
    assert "DATABASE_URL=postgresql://me@db/bench" in seen
    dump.unlink()
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR" + b"\x00" * 13)
    predict = dlbs_cli("predict", "--framework", "dummy", "--model", "m", "-P", launcher,
                       "a.png", cwd=tmp_path, env=SECRETS)
    assert predict.returncode in (0, 1), predict.stderr
    assert "s3cret" not in _dumped(dump)


def test_16_docker_e_name_passes_no_credential(monkeypatch):
    from dlbs.recipes.docker_args import translate

    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOST_VALUE", "kept")
    args = translate(["-e", "PGPASSWORD", "-e", "HOST_VALUE", "-e", "DATABASE_URL",
                      "-e", "EXPLICIT=given"])
    assert args.kwargs["environment"] == {"HOST_VALUE": "kept", "EXPLICIT": "given",
                                          "DATABASE_URL": "postgresql://me@db/bench"}


def test_16_sbatch_is_given_no_credentials(monkeypatch):
    from dlbs.run.targets import slurm

    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    done = slurm._run(["env"])   # what sbatch, and so the job, would inherit
    assert done.returncode == 0
    assert "s3cret" not in done.stdout and "PATH=" in done.stdout


# -- 4: a URL scheme in another case; a URL of no supported store ------------------------------
SECRET = "Hunter2-s3cret"


def _all_text(folder: Path) -> str:
    """Every file under `folder` and every name in it, as one text (what a leak would be in)."""
    parts = []
    for path in folder.rglob("*"):
        parts.append(str(path))
        if path.is_file():
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


@pytest.mark.parametrize("scheme", ["postgresql", "Postgresql", "POSTGRESQL", "PostGres"])
def test_4_schemes_are_case_insensitive(scheme):
    from dlbs.results.store import is_store_url, store_name
    from dlbs.util.credentials import canonical_url, masked, without_password

    url = f"{scheme}://bench:{SECRET}@db.example.org:5432/results"
    assert is_store_url(url)
    assert SECRET not in store_name(url) and store_name(url).startswith("postgresql://bench@")
    assert without_password(url) == f"{scheme}://bench@db.example.org:5432/results"
    assert canonical_url(url).startswith(scheme.lower() + "://")
    assert SECRET not in repr(masked({"runtime.results_db": url, "x": [f"see {url}"]}))


@pytest.mark.postgres
@pytest.mark.parametrize("scheme", ["Postgresql", "POSTGRESQL", "Postgres"])
def test_4_a_run_with_a_scheme_in_another_case_reaches_postgresql(dlbs_cli, tmp_path, scheme):
    from helpers_results import postgres_store_url

    from dlbs.results.store import open_store

    with postgres_store_url() as url:
        shouted = scheme + url[url.index("://"):]
        plan = dlbs_cli("plan", *DUMMY, "-P", f"runtime.results_db={shouted}", cwd=tmp_path)
        assert plan.returncode == 0, plan.stderr
        password = url.split("://", 1)[1].split("@", 1)[0].partition(":")[2]
        assert password and password not in plan.stdout + plan.stderr
        run = dlbs_cli("run", *DUMMY, "-P", f"runtime.results_db={shouted}", cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        with open_store(url) as store:
            (attempt,) = store.attempts()
        assert attempt.status == "ok"
        assert password not in repr(attempt) and password not in run.stdout + run.stderr
        assert password not in _all_text(tmp_path)
        assert sorted(path.name for path in tmp_path.iterdir()) == ["logs"]  # no "Postgresql:"


@pytest.mark.parametrize("location", [
    f"mysql://u:{SECRET}@db/results", f"postgresq://u:{SECRET}@db/results",
    f"sqlite://u:{SECRET}@/results.db", f"HTTP://u:{SECRET}@db/x",
    f"pg://db/results?password={SECRET}", "mongodb://db/results",
])
def test_4_a_url_of_no_supported_store_is_refused_masked(dlbs_cli, tmp_path, location):
    plan = dlbs_cli("plan", *DUMMY, "-P", f"runtime.results_db={location}", cwd=tmp_path)
    assert_one_error_line(plan, "is a URL of no results store dlbs opens")
    run = dlbs_cli("run", *DUMMY, "-P", f"runtime.results_db={location}", cwd=tmp_path)
    assert_one_error_line(run, "is a URL of no results store dlbs opens")
    assert SECRET not in plan.stdout + plan.stderr + run.stdout + run.stderr
    assert list(tmp_path.iterdir()) == []   # no folder named after it, no log


@pytest.mark.parametrize("command", [
    ["report", "{url}"], ["parse", "{url}"], ["history", "{url}"], ["serve", "{url}"],
    ["trace", "{url}", "--id", "x"], ["results", "copy", "{url}", "{tmp}/a.db"],
    ["results", "copy", "{tmp}", "{url}"], ["compare", "{url}", "{url}"],
])
def test_4_readers_refuse_a_url_of_no_supported_store_masked(tmp_path, capsys, command):
    from dlbs.cli.main import main

    url = f"MySQL://u:{SECRET}@db/results"
    assert main([part.format(url=url, tmp=tmp_path) for part in command]) == 2
    captured = capsys.readouterr()
    assert "is a URL of no results store dlbs opens" in captured.err, captured.err
    assert SECRET not in captured.out + captured.err and "MySQL://u@db/results" in captured.err
    assert not (tmp_path / "a.db").exists()


# -- 11: malformed rows: one clear error naming the row, in every reader ----------------------
MALFORMED = [("params", '"a string"'), ("params", "[1, 2]"), ("params", "null"),
             ("params", "7"), ("params", "not json"), ("results", "null"),
             ("results", "[1, 2]"), ("results", '"text"'), ("summary", "[1]"),
             ("summary", "null"), ("summary", "{bad"), ("environment", '"x"'),
             ("environment", "[]"), ("environment", "true")]


def _stored_attempt(location: str) -> None:
    """One ok attempt with monitor series, and one healthy experiment beside it."""
    from dlbs.results.store import Attempt, open_store

    end = "2026-01-01T10:00:30.000+00:00"
    results = {"results.time_data": [10.0, 11.0, 12.0], "results.end_time": end,
               "results.use.time": [0.0, 1.0], "results.use.cpu": [50.0, 60.0]}
    params = {"exp.model": "resnet18", "exp.replica_batch": 2, "exp.framework": "dummy",
              "exp.num_gpus": 1}
    with open_store(location) as store:
        store.record_attempts([
            Attempt("bad", 1, "ok", None, params, results, None, {"host": "h"}, None,
                    "2026-01-01T10:00:00.000+00:00", end, run_tag="t", run_host="h"),
            Attempt("good", 1, "ok", None, dict(params, **{"exp.replica_batch": 4}), results,
                    None, {"host": "h"}, None, "2026-01-01T10:00:00.000+00:00", end,
                    run_tag="t", run_host="h")])


def _set_column(location: str, column: str, text: str) -> None:
    """What a writer of the store could do: UPDATE a column of experiment `bad`."""
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute(f"UPDATE attempts SET {column} = %s WHERE exp_id = 'bad'", (text,))
        return
    import sqlite3

    with sqlite3.connect(location) as conn:
        conn.execute(f"UPDATE attempts SET {column} = ? WHERE exp_id = 'bad'", (text,))
    conn.close()


def _readers(location: str, tmp_path: Path) -> dict[str, list[str]]:
    return {"parse": ["parse", location], "copy": ["results", "copy", location,
                                                   str(tmp_path / "copy.db")],
            "report": ["report", location], "report json": ["report", location, "--format",
                                                            "json"],
            "report html": ["report", location, "--format", "html"],
            "report efficiency": ["report", location, "--type", "efficiency"],
            "history": ["history", location], "trace": ["trace", location, "--id", "bad"]}


def _one_error_or_fine(capsys, argv: list[str]) -> str:
    from dlbs.cli.main import main

    status = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    if status != 0:
        lines = captured.err.strip().splitlines()
        assert status == 2 and lines[0].startswith("dlbs: error: "), captured.err
        assert len(lines) <= 2, captured.err
    return captured.err if status else ""


# Every malformation in SQLite; in PostgreSQL (the same reads, other drivers) one of each column.
MALFORMED_CASES = [pytest.param("sqlite", column, text, id=f"sqlite-{column}-{text}")
                   for column, text in MALFORMED] + [
    pytest.param("postgresql", column, text, id=f"postgresql-{column}-{text}",
                 marks=pytest.mark.postgres)
    for column, text in (MALFORMED[0], MALFORMED[5], MALFORMED[8], MALFORMED[11])]


@pytest.mark.parametrize(("kind", "column", "text"), MALFORMED_CASES)
def test_11_a_malformed_row_is_one_error_naming_it(tmp_path, capsys, kind, column, text):
    from helpers_results import postgres_store_url

    with contextlib.ExitStack() as stack:
        location = str(tmp_path / "store.db") if kind == "sqlite" else \
            stack.enter_context(postgres_store_url())
        _malformed_row_readers(location, tmp_path, capsys, column, text)


def _malformed_row_readers(location: str, tmp_path: Path, capsys, column: str,
                           text: str) -> None:
    store_location = location
    _stored_attempt(store_location)
    _set_column(store_location, column, text)
    for name, argv in _readers(store_location, tmp_path).items():
        error = _one_error_or_fine(capsys, argv)
        if name in ("parse", "copy") or error and name != "trace":
            assert "the row of experiment bad, attempt 1" in error, (name, error)
            assert f"its {column}" in error, (name, error)


# SQLite keeps a TEXT column's number as text; bytes keep their type.
@pytest.mark.parametrize(("column", "value"), [("attempt", "x"), ("attempt", 1.5),
                                               ("exp_id", b"e"), ("log_path", b"/etc"),
                                               ("started_at", b"t"), ("run_folder", b"/"),
                                               ("status_msg", b"x")])
def test_11_a_column_of_another_type_is_named(tmp_path, capsys, column, value):
    location = str(tmp_path / "store.db")
    _stored_attempt(location)
    import sqlite3

    with sqlite3.connect(location) as conn:   # SQLite keeps what it is given
        conn.execute(f"UPDATE attempts SET {column} = ? WHERE exp_id = 'bad'", (value,))
    conn.close()
    for name, argv in _readers(location, tmp_path).items():
        error = _one_error_or_fine(capsys, argv)
        if name in ("parse", "copy"):
            assert "results database" in error and "the row of experiment" in error, error


@pytest.mark.parametrize(("column", "text"), MALFORMED[:7])
def test_11_serve_answers_a_malformed_row_with_a_page(tmp_path, column, text):
    from helpers_results import http_get, serve_in_process

    location = str(tmp_path / "store.db")
    _stored_attempt(location)
    _set_column(location, column, text)
    with serve_in_process(location) as base:
        for path in ("/", "/experiments", "/report", "/history", "/experiment/bad",
                     "/experiment/good", "/report?format=csv"):
            status, _, body = http_get(base, path)
            assert status in (200, 400), (path, status, body[:500])
            if path == "/experiment/bad":
                assert status == 400 and "the row of experiment bad, attempt 1" in body


def test_11_the_shape_rules_in_one_place():
    from dlbs.results.row_shape import MalformedRow, checked_row

    good = {"exp_id": "e", "attempt": 1, "status": "ok", "params": "{}", "results": None,
            "environment": '{"host": "h"}', "summary": "{}", "started_at": "t",
            "ended_at": None, "log_path": None}
    row = checked_row("db", good)
    assert row["results"] == {} and row["environment"] == {"host": "h"}
    for column, value in [("attempt", 0), ("attempt", True), ("attempt", 1.0),
                          ("status", "great"), ("exp_id", ""), ("params", None),
                          ("started_at", None), ("ended_at", 5), ("results", b"{}")]:
        with pytest.raises(MalformedRow, match="the row of experiment"):
            checked_row("db", {**good, column: value})


# -- 7: a backend's output cannot relabel its experiment ----------------------------------------
RELABEL = ['__exp.model__="resnet50"', "__exp.replica_batch__=512", '__exp.id__="other"',
           '__exp.log_file__="/etc/passwd"', '__results.trace_file__="/root/.pgpass"',
           '__results.use.gpu_power__=[900, 900]', '__results.log_file__="/etc/shadow"',
           '__runtime.results_db__="/tmp/elsewhere.db"', '__exp.num_gpus__=64']
OWNED = ['__exp.model_title__="My ResNet"', '__results.custom_metric__=7']


def _printing_launcher(lines: list[str], after: bool) -> str:
    """A runtime.launcher that prints `lines` before (or after) the benchmark runs."""
    echo = "; ".join(f"echo '{line}'" for line in lines)
    script = f'"$@"; s=$?; {echo}; exit $s' if after else f'{echo}; exec "$@"'
    return f"runtime.launcher=sh -c '{script.replace(chr(39), chr(39) + chr(92) + chr(39) * 2)}' x"


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
def test_7_what_a_benchmark_prints_never_relabels_its_experiment(dlbs_cli, tmp_path, capsys,
                                                                 after):
    import json

    from dlbs.cli.main import main

    launcher = _printing_launcher(RELABEL + OWNED, after)
    run = dlbs_cli("run", *DUMMY, "-P", "exp.model=resnet18", "-V", "exp.replica_batch=[2, 4]",
                   "-P", launcher, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if "not taken" in line]
    assert len(warnings) == 1, run.stderr   # once for the sweep, naming every key
    for key in ("exp.model", "exp.replica_batch", "exp.id", "exp.log_file",
                "results.trace_file", "results.use.gpu_power", "results.log_file",
                "runtime.results_db", "exp.num_gpus"):
        assert key + "," in warnings[0] or key + ":" in warnings[0], (key, warnings[0])
    logs = tmp_path / "logs"
    copies = {"logs": tmp_path / "from-logs.db", "db": tmp_path / "from-db.db"}
    assert main(["results", "copy", str(logs), str(copies["logs"])]) == 0
    assert main(["results", "copy", str(logs / "results.db"), str(copies["db"])]) == 0
    capsys.readouterr()
    logs_named = [str(path) for path in sorted(logs.glob("*.log"))]
    readers = [["parse", str(logs)], ["parse", str(logs / "results.db")],
               ["parse", *logs_named], ["parse", str(copies["logs"])],
               ["parse", str(copies["db"])], ["report", str(logs), "--format", "json"],
               ["report", *logs_named, "--format", "json"],
               ["report", str(copies["logs"]), "--format", "json"]]
    for argv in readers:
        assert main(argv) == 0, argv
        document = json.loads(capsys.readouterr().out)
        if argv[0] == "report":   # the table's rows name the model and the batch
            assert document["row_keys"][:2] == ["exp.model", "exp.replica_batch"], argv
            assert sorted((row["model"], row["replica_batch"])
                          for row in document["rows"]) == [("resnet18", 2), ("resnet18", 4)]
            continue
        rows = document["experiments"]
        assert sorted((row["exp.model"], row["exp.replica_batch"]) for row in rows) == [
            ("resnet18", 2), ("resnet18", 4)], argv
        for row in rows:
            assert row["exp.id"] != "other" and row["exp.num_gpus"] != 64, argv
            assert "/etc/" not in row["exp.log_file"] + row["results.log_file"], argv
            assert "results.trace_file" not in row and "results.use.gpu_power" not in row
            assert "elsewhere" not in row["runtime.results_db"], argv
            assert row["results.custom_metric"] == 7, argv
            # Owned, so taken: the last one printed (the dummy prints its own after "before").
            assert row["exp.model_title"] == ("My ResNet" if after else "ResNet18"), argv


def test_7_a_stored_relabel_of_an_older_dlbs_is_not_read(tmp_path, capsys):
    """A row whose results hold planner keys (an older dlbs stored them): params win."""
    import json

    from dlbs.cli.main import main
    from dlbs.results.store import Attempt, open_store

    location = str(tmp_path / "old.db")
    end = "2026-01-01T10:00:30.000+00:00"
    with open_store(location) as store:
        store.record_attempts([Attempt(
            "e1", 1, "ok", None, {"exp.model": "resnet18", "exp.replica_batch": 2},
            {"exp.model": "resnet50", "exp.replica_batch": 512, "exp.model_title": "R",
             "results.time_data": [1.0, 2.0], "results.end_time": end}, None, {}, None,
            "2026-01-01T10:00:00.000+00:00", end)])
    for argv in (["parse", location], ["report", location, "--format", "json"]):
        assert main(argv) == 0
        text = capsys.readouterr().out
        assert "resnet50" not in text and "512" not in text and "resnet18" in text, text
    assert main(["parse", location]) == 0
    (row,) = json.loads(capsys.readouterr().out)["experiments"]
    assert row["exp.model_title"] == "R"


def test_7_the_ownership_rules():
    from dlbs.results.protocol import backend_output, backend_owns

    assert all(backend_owns(key) for key in ("results.time", "results.status", "results.x.y",
                                             "exp.model_title", "exp.framework_ver",
                                             "predict.result", "job.monitor.n1",
                                             "job.environment.n1"))
    assert not any(backend_owns(key) for key in (
        "exp.model", "exp.id", "exp.log_file", "exp.trace_file", "results.use.cpu",
        "results.log_file", "results.attempt", "runtime.results_db", "dlbs.verdict",
        "job.other", "anything"))
    planned = {"exp.model": "m", "exp.trace_file": "logs/a.trace.json.gz"}
    taken, refused = backend_output(
        {"exp.model": "m", "results.trace_file": "/work/logs/a.trace.json.gz",
         "results.time": 1.0, "user.axis": 3}, planned)
    assert taken == {"results.trace_file": "/work/logs/a.trace.json.gz", "results.time": 1.0}
    assert refused == ["user.axis"]   # an echo of a parameter is no news
    for elsewhere in ("/root/.pgpass", "logs/a.trace.json.gz", "/work/logs/b.trace.json.gz",
                      "/work/xlogs/a.trace.json.gz", 5):
        assert backend_output({"results.trace_file": elsewhere}, planned)[1] == [
            "results.trace_file"], elsewhere
    assert backend_output({"results.trace_file": "/w/logs/a.trace.json.gz"}, planned,
                          cwd="/work")[1] == ["results.trace_file"]
    assert backend_output({"results.trace_file": "/x.gz"}, {})[1] == ["results.trace_file"]


def _log_lines(*lines: str) -> list[str]:
    return [line + "\n" for line in lines]


def test_7_a_log_is_read_by_its_parts():
    from dlbs.results.protocol import HEADER_END, experiment_from_log, parse_lines

    head = ["# dlbs 0.1.0: experiment e1, attempt 1, started 2026-01-01T00:00:00+00:00",
            '__exp.id__="e1"', '__exp.model__="resnet18"']
    body = ["some output", '__exp.model__="resnet50"', '__results.time__=2.0',
            '__exp.model_title__="ResNet18"']
    new = experiment_from_log(parse_lines(_log_lines(*head, HEADER_END, *body)))
    assert new["exp.model"] == "resnet18" and new["exp.model_title"] == "ResNet18"
    assert new["results.status"] == "ok"
    # A header written before its closing line: it ends at the first line that is no
    # parameter (or a result: the backend's first line right after the header).
    old = experiment_from_log(parse_lines(_log_lines(*head, *body)))
    assert old["exp.model"] == "resnet18"
    glued = experiment_from_log(parse_lines(_log_lines(
        *head, '__results.start_time__="t"', '__exp.model__="vgg"', "__results.time__=1")))
    assert glued["exp.model"] == "resnet18" and glued["results.start_time"] == "t"
    # A log without a dlbs header (DLBS's, or written by hand): every key as printed.
    dlbs_log = experiment_from_log(parse_lines(_log_lines(*body)))
    assert dlbs_log["exp.model"] == "resnet50"
    # A header line further down is output like any other.
    late = experiment_from_log(parse_lines(_log_lines("x", *head, *body)))
    assert late["exp.model"] == "resnet50"


# -- 8: the log records the verdict dlbs reached ------------------------------------------------
@pytest.mark.parametrize(("fail", "status", "message"), [
    ("", "ok", None), ("exit", "failure", "process exited with status 1"),
    ("kill", "failure", "killed by SIGKILL"), ("segv", "failure", "SIGSEGV"),
    ("hang", "timeout", "still running after the timeout"),
])
def test_8_a_log_alone_keeps_the_verdict(dlbs_cli, tmp_path, capsys, fail, status, message):
    import json

    from dlbs.cli.main import main
    from dlbs.results.protocol import parse_log

    run = dlbs_cli("run", *DUMMY, "-P", f"dummy.fail={fail}", "-P", "exp.timeout=2",
                   cwd=tmp_path)
    assert run.returncode == (0 if status == "ok" else 1), run.stderr
    (log,) = (tmp_path / "logs").glob("*.log")
    verdict = parse_log(log).verdict
    assert verdict is not None and verdict["status"] == status
    assert message is None and verdict["message"] is None or message in verdict["message"]
    (tmp_path / "logs" / "results.db").unlink()   # the log alone
    assert main(["parse", str(log)]) == 0
    (row,) = json.loads(capsys.readouterr().out)["experiments"]
    assert row["results.status"] == status
    assert row.get("results.status_msg") == verdict["message"] or status == "ok"


def test_8_an_attempt_closed_by_the_next_run_gets_its_verdict(dlbs_cli, tmp_path):
    from dlbs.results.protocol import parse_log
    from dlbs.results.store import open_store

    assert dlbs_cli("run", *DUMMY, cwd=tmp_path).returncode == 0
    database = tmp_path / "logs" / "results.db"
    with open_store(database) as store:
        (first,) = store.attempts()
        cut = tmp_path / "logs" / "cut.log"
        cut.write_text(f"# dlbs 0.1.0: experiment {first.exp_id}, attempt 2, started x\n"
                       f'__exp.id__="{first.exp_id}"\n'
                       "# dlbs: the run's output follows\n__results.time__=50.0")
        store.record_start(first.exp_id, 2, first.params, log_path=str(cut))
    run = dlbs_cli("run", *DUMMY, cwd=tmp_path)   # settles the open attempt, runs nothing
    assert run.returncode == 0, run.stderr
    parsed = parse_log(cut)
    assert parsed.verdict is not None and parsed.verdict["status"] == "interrupted"
    assert "results.time" not in parsed.values   # the cut number stays unread
    with open_store(database) as store:
        closed = store.attempts(first.exp_id)[1]
    assert (parsed.verdict["started_at"], parsed.verdict["ended_at"]) == (
        closed.started_at, closed.ended_at)


@pytest.mark.parametrize(("tail", "read"), [
    (b"__results.time__=50.0", False),           # may be the start of 50.089: stays unread
    (b"__results.time__=50.0\n", True),
    (b'__results.status_msg__="whole"', True),   # a whole string without its line ending
    (b"progress 50%\r__results.time__=5", False),
    (b"", True), (b"plain words", True),
])
def test_8_the_verdict_keeps_a_cut_last_line_unread(tmp_path, tail, read):
    from dlbs.results.protocol import parse_log
    from dlbs.run.logs import append_verdict

    log = tmp_path / "a.log"
    log.write_bytes(b"# dlbs 0.1.0: experiment e, attempt 1, started x\n"
                    b"# dlbs: the run's output follows\n" + tail)
    before = parse_log(log)
    assert append_verdict(str(log), {"attempt": 1, "status": "timeout", "message": "m"})
    after = parse_log(log)
    assert after.verdict == {"attempt": 1, "status": "timeout", "message": "m"}
    assert {k: v for k, v in after.printed.items() if k != "dlbs.verdict"} == before.printed
    assert bool(before.printed) == (read and b"__" in tail)


def test_8_the_last_verdict_counts_and_a_forged_one_is_replaced(tmp_path):
    from dlbs.results.protocol import experiment_from_log, parse_log
    from dlbs.run.logs import append_verdict

    log = tmp_path / "a.log"
    log.write_text("# dlbs 0.1.0: experiment e, attempt 1, started x\n"
                   "# dlbs: the run's output follows\n"
                   '__dlbs.verdict__={"status": "ok", "message": null}\n__results.time__=1\n')
    assert append_verdict(str(log), {"attempt": 1, "status": "timeout", "message": "t"})
    experiment = experiment_from_log(parse_log(log))
    assert (experiment["results.status"], experiment["results.status_msg"]) == ("timeout", "t")
    assert not append_verdict(str(tmp_path / "missing.log"), {"status": "ok"})


# -- issue 30 section 2, third bullet: parse FOLDER gives the keys report FOLDER reads ---------
MONITORED = [*DUMMY, "-P", "dummy.sleep=0.02", "-P", "monitor.frequency=0.01", "-P",
             "dummy.busy=true", "-V", "exp.replica_batch=[2, 4]", "-P", "runtime.run_tag=t1"]


@pytest.fixture
def monitored_folder(dlbs_cli, tmp_path) -> Path:
    run = dlbs_cli("run", *MONITORED, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    return tmp_path / "logs"


def _parsed(capsys, *argv: str) -> list[dict]:
    import json

    from dlbs.cli.main import main

    assert main(["parse", *argv]) == 0
    return json.loads(capsys.readouterr().out)["experiments"]


def test_30_parse_of_a_folder_gives_what_report_reads(monitored_folder, capsys):
    from dlbs.report.inputs import load_inputs

    rows = _parsed(capsys, str(monitored_folder))
    assert len(rows) == 2
    parsed_keys = set.intersection(*(set(row) for row in rows))
    attempts = load_inputs([str(monitored_folder)])
    report_keys = set(attempts.keys())
    assert report_keys <= parsed_keys, report_keys - parsed_keys
    for row in rows:
        assert row["env.host"] and row["env.cpu_model"], row   # the environment
        assert row["results.use.cpu_mean"] >= 0 and "results.use.cpu_max" in row   # monitor
        assert "results.energy_unavailable" in row or "results.energy_j" in row    # energy
        assert row["runtime.run_tag"] == "t1" and row["results.log_file"].startswith("/")
    # The same values the report shows, key by key (the numbers it reads are the summary's).
    for key in ("results.use.cpu_mean", "results.time_median", "env.cpu_model"):
        column = attempts.column(key) if not key.startswith("results.") else None
        if column is not None:
            shown = {str(value) for value in column.values if value is not None}
            assert shown == {str(row[key]) for row in rows}
    # And the database named alone gives the same keys for its newest attempts.
    alone = _parsed(capsys, str(monitored_folder / "results.db"))
    assert {row["exp.id"]: row for row in alone} == {row["exp.id"]: row for row in rows}


def test_30_a_folder_is_its_database_then_the_logs_it_lacks(monitored_folder, capsys):
    extra = monitored_folder / "sub" / "copied_in.log"
    extra.parent.mkdir()
    extra.write_text('__exp.id__="hand"\n__exp.model__="m"\n__results.time__=2.0\n')
    rows = _parsed(capsys, str(monitored_folder))
    assert sorted(row["exp.id"] for row in rows)[-1] == "hand" and len(rows) == 3
    hand = next(row for row in rows if row["exp.id"] == "hand")
    assert hand["results.status"] == "ok" and not any(k.startswith("env.") for k in hand)


def test_30_logs_the_database_names_relatively_are_known(monitored_folder, capsys):
    """Rows of an older dlbs kept log paths relative to where the run was started."""
    import sqlite3

    database = monitored_folder / "results.db"
    with sqlite3.connect(database) as conn:
        conn.execute("UPDATE attempts SET log_path = 'logs/' || "
                     "substr(log_path, length(run_folder) + 2)")
        assert all(not path.startswith("/") for (path,) in
                   conn.execute("SELECT log_path FROM attempts"))
    conn.close()
    rows = _parsed(capsys, str(monitored_folder))
    assert len(rows) == 2   # each attempt once: its log is the row's


# -- issue 33 item 1: results copy reads a folder as report does ---------------------------
def test_33_a_copy_of_a_folder_keeps_everything_its_database_has(monitored_folder, tmp_path,
                                                                  capsys):
    from dlbs.cli.main import main
    from dlbs.results.store import open_store

    copy = tmp_path / "copy.db"
    assert main(["results", "copy", str(monitored_folder), str(copy)]) == 0
    assert "copied 2 attempt(s)" in capsys.readouterr().err
    with open_store(monitored_folder / "results.db") as original, open_store(copy) as copied:
        for before, after in zip(original.attempts(), copied.attempts(), strict=True):
            assert after.environment == before.environment and after.environment["host"]
            assert (after.run_tag, after.run_host, after.run_folder) == (
                before.run_tag, before.run_host, before.run_folder) == (
                "t1", before.environment["host"], str(monitored_folder))
            assert after.results["results.use.cpu"] == before.results["results.use.cpu"]
            assert after.summary == before.summary
            assert after.log_path == before.log_path and os.path.isabs(after.log_path)
    reports = []
    for argv in (["report", str(copy), "--format", "json"],
                 ["report", str(monitored_folder), "--format", "json"]):
        assert main(argv) == 0
        reports.append(capsys.readouterr().out)
    assert reports[0] == reports[1]
    # One experiment is one configuration, whatever store it is read from.
    assert _parsed(capsys, str(copy)) == _parsed(capsys, str(monitored_folder / "results.db"))
    assert main(["results", "copy", str(monitored_folder), str(copy)]) == 0
    assert "copied 0 attempt(s)" in capsys.readouterr().err


def _hand_log(path: Path, time_ms: float, extra: str = "") -> None:
    path.write_text(f'__exp.id__="e1"\n__exp.model__="m"\n__results.time__={time_ms}\n{extra}')


def test_33_logs_without_an_end_time_are_told_apart_by_their_content(tmp_path):
    from dlbs.results.copying import copy_results
    from dlbs.results.store import open_store

    folder = tmp_path / "dlbs-logs"
    folder.mkdir()
    _hand_log(folder / "a.log", 2.0)
    _hand_log(folder / "b.log", 3.0)
    _hand_log(folder / "c.log", 2.0, '__results.status__="failure"\n')
    for log in folder.iterdir():   # one second, as a tar or a copy leaves them
        os.utime(log, (1_700_000_000, 1_700_000_000))
    store = str(tmp_path / "store.db")
    first = copy_results(str(folder), store)
    assert (first.copied, first.already_there) == (3, 0)
    again = copy_results(str(folder), store)
    assert (again.copied, again.already_there) == (0, 3)
    # The same log elsewhere (a copy of the folder, other times) is the same attempt.
    other = tmp_path / "other"
    other.mkdir()
    _hand_log(other / "again.log", 3.0)
    _hand_log(other / "new.log", 4.0)
    third = copy_results(str(other), store)
    assert (third.copied, third.already_there) == (1, 1)
    with open_store(store) as reader:
        assert [a.attempt for a in reader.attempts("e1")] == [1, 2, 3, 4]


# -- issue 34 item 8: results copy LOG_FOLDER keeps outcomes; its own store gains nothing ----
def test_34_8_copies_of_a_folder_keep_outcomes_and_add_nothing_twice(dlbs_cli, tmp_path,
                                                                     capsys):
    from dlbs.cli.main import main
    from dlbs.results.store import open_store

    run = dlbs_cli("run", *DUMMY, "-V", 'dummy.fail=["", "kill", "hang", "exit", "segv"]',
                   "-P", "exp.timeout=2", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    logs = tmp_path / "logs"
    with open_store(logs / "results.db") as store:
        recorded = sorted((a.exp_id, a.status, a.status_msg) for a in store.attempts())
    assert {status for _, status, _ in recorded} == {"ok", "failure", "timeout"}
    # Into its own store: nothing new.
    assert main(["results", "copy", str(logs), str(logs)]) == 0
    assert "copied 0 attempt(s)" in capsys.readouterr().err
    # The logs alone (the database moved away) into another store: the outcomes as recorded.
    (logs / "results.db").rename(tmp_path / "moved.db")
    assert main(["results", "copy", str(logs), str(tmp_path / "fresh.db")]) == 0
    with open_store(tmp_path / "fresh.db") as fresh:
        assert sorted((a.exp_id, a.status, a.status_msg)
                      for a in fresh.attempts()) == recorded
    # ... and into the database they came from: every attempt is already there.
    assert main(["results", "copy", str(logs), str(tmp_path / "moved.db")]) == 0
    assert "copied 0 attempt(s) from" in capsys.readouterr().err
    with open_store(tmp_path / "moved.db") as moved:
        assert len(moved.attempts()) == len(recorded)


# -- 34 item 1 and 33 item 3: serve shows an attempt's own log and trace, from anywhere ------
SECRET_TEXT = "machine db login secret-0xC0FFEE"


@pytest.fixture
def traced_folder(dlbs_cli, tmp_path) -> Path:
    """A run of two experiments, the first traced, in tmp_path/run (logs in run/logs)."""
    where = tmp_path / "run"
    where.mkdir()
    run = dlbs_cli("run", *DUMMY, "-V", "exp.replica_batch=[2, 4]", "-E",
                   '{"condition": {"exp.replica_batch": 2}, "parameters": '
                   '{"exp.trace_level": "step", "exp.trace_batches": 1}}', cwd=where)
    assert run.returncode == 0, run.stderr
    return where / "logs"


def _page(location: str, exp_id: str) -> str:
    from helpers_results import http_get, serve_in_process

    with serve_in_process(location) as base:
        status, _, body = http_get(base, f"/experiment/{exp_id}")
    assert status == 200, body[body.find("<h1>"):][:800]
    return body


def _rows(database: Path) -> list[tuple[str, str, str]]:
    import sqlite3

    with sqlite3.connect(database) as conn:
        rows = conn.execute("SELECT exp_id, log_path, run_folder FROM attempts "
                            "ORDER BY exp_id").fetchall()
    conn.close()
    return rows


def _set(database: Path, exp_id: str, **columns: object) -> None:
    import sqlite3

    with sqlite3.connect(database) as conn:
        for column, value in columns.items():
            conn.execute(f"UPDATE attempts SET {column} = ? WHERE exp_id = ?", (value, exp_id))
    conn.close()


def test_3_serve_shows_the_log_and_trace_from_any_folder(traced_folder, monkeypatch, tmp_path):
    import sqlite3

    database = traced_folder / "results.db"
    rows = _rows(database)
    assert all(os.path.isabs(log) for _, log, _ in rows)   # absolute in the store
    with sqlite3.connect(database) as conn:
        traced = conn.execute("SELECT exp_id FROM attempts WHERE results LIKE "
                              "'%results.trace_file%'").fetchone()[0]
    conn.close()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    body = _page(str(database), traced)
    assert "done: 2 batches" in body and 'id="log"' in body
    assert 'id="trace-' in body
    # Rows of an older dlbs: a path relative to where the run was started.
    for exp_id, log, folder in rows:
        _set(database, exp_id, log_path=os.path.relpath(log, folder.rsplit("/", 1)[0]))
    assert all(not os.path.isabs(log) for _, log, _ in _rows(database))
    body = _page(str(database), traced)
    assert "done: 2 batches" in body and 'id="trace-' in body


def test_3_a_folder_moved_with_its_store_still_shows_its_logs(traced_folder, tmp_path):
    import shutil

    moved = tmp_path / "moved"
    shutil.copytree(traced_folder, moved)
    shutil.rmtree(traced_folder)
    (exp_id, _, _), _ = _rows(moved / "results.db")
    body = _page(str(moved / "results.db"), exp_id)
    assert "done: 2 batches" in body and str(moved) in body


def _secret(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    secret = home / ".pgpass"
    secret.write_text(f"# dlbs 0.1.0: experiment x, attempt 1\n{SECRET_TEXT}\n")
    return secret


@pytest.mark.parametrize("forgery", [
    "pgpass", "pgpass in its folder", "relative out", "root folder", "link inside",
    "another experiment's log", "fifo", "folder", "no run folder", "device",
])
def test_34_1_a_row_naming_another_file_shows_nothing_but_why(traced_folder, tmp_path,
                                                              forgery):
    database = traced_folder / "results.db"
    (exp_id, own_log, folder), (other_id, other_log, _) = _rows(database)
    secret = _secret(tmp_path)
    forged = {
        "pgpass": {"log_path": str(secret)},
        "pgpass in its folder": {"log_path": str(secret), "run_folder": str(secret.parent)},
        "relative out": {"log_path": os.path.relpath(secret, folder)},
        "root folder": {"log_path": str(secret), "run_folder": "/"},
        "another experiment's log": {"log_path": other_log},
        "fifo": {"log_path": str(traced_folder / "pipe.log")},
        "folder": {"log_path": folder},
        "no run folder": {"run_folder": None},
        "device": {"log_path": "/dev/zero", "run_folder": "/dev"},
    }
    if forgery == "link inside":
        (traced_folder / "link.log").symlink_to(secret)
        forged["link inside"] = {"log_path": str(traced_folder / "link.log")}
    if forgery == "fifo":
        os.mkfifo(traced_folder / "pipe.log")
    _set(database, exp_id, **forged[forgery])
    body = _page(str(database), exp_id)
    assert SECRET_TEXT not in body and 'id="log"' not in body
    assert "is not shown" in body or "has no run folder" in body or "not on this" in body
    assert 'id="trace-' not in body
    assert "done: 2 batches" in _page(str(database), other_id)   # the other row is shown


def test_34_1_the_trace_is_the_one_its_log_names(traced_folder, tmp_path):
    import sqlite3

    database = traced_folder / "results.db"
    secret = _secret(tmp_path)
    with sqlite3.connect(database) as conn:
        exp_id, results = conn.execute(
            "SELECT exp_id, results FROM attempts WHERE results LIKE '%trace_file%'").fetchone()
        # The row's results.trace_file is not what is shown: the log's is.
        conn.execute("UPDATE attempts SET results = replace(results, ?, ?) WHERE exp_id = ?",
                     (__import__("json").loads(results)["results.trace_file"], str(secret),
                      exp_id))
    conn.close()
    assert 'id="trace-' in _page(str(database), exp_id)
    # A trace replaced by another file (a log, a key) is not shown as one.
    (trace,) = traced_folder.glob("*.trace.json.gz")
    trace.write_text(SECRET_TEXT)
    body = _page(str(database), exp_id)
    assert SECRET_TEXT not in body and 'id="trace-' not in body
    assert "not shown" in body or "cannot read the trace" in body
    trace.unlink()
    trace.symlink_to(secret)   # a link out of the run folder
    body = _page(str(database), exp_id)
    assert SECRET_TEXT not in body
    assert "only files inside the attempt&#39;s run folder" in body


def test_34_1_the_rules_in_one_place(tmp_path):
    from dlbs.results.attempt_files import NotShown, attempt_log, resolve_log_path

    folder = tmp_path / "logs"
    folder.mkdir()
    log = folder / "a.log"
    log.write_text("# dlbs 0.1.0: experiment e1, attempt 1, started t\n")
    assert attempt_log("e1", str(log), str(folder)) == str(log)
    assert attempt_log("e1", "logs/a.log", str(folder)) == str(log)
    for exp_id, path, run in [("e2", str(log), str(folder)), ("e1", None, str(folder)),
                              ("e1", str(log), "logs"), ("e1", "a.log", None),
                              ("e1", "../logs/a.log", str(folder / "sub"))]:
        with pytest.raises(NotShown):
            attempt_log(exp_id, path, run)
    assert resolve_log_path("logs/x.log", "/home/me/bench/logs") == "/home/me/bench/logs/x.log"
    assert resolve_log_path("x.log", "/home/me") == "/home/me/x.log"
    assert resolve_log_path("/abs/x.log", None) == "/abs/x.log"
    assert resolve_log_path("x.log", None) is None


# -- found by the fuzz suite: a lone surrogate is no text ---------------------------------------
@pytest.mark.parametrize("value", ['"\\ud800"', '"a\\udcffb"', '["x", "\\udfff"]',
                                   '{"k": "\\ud800", "n": 12345678901234567890}'])
def test_12_a_lone_surrogate_in_a_log_or_a_row_is_no_json(tmp_path, capsys, value):
    import sqlite3

    from dlbs.cli.main import main

    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.log").write_text(f'__exp.id__="s1"\n__exp.model__={value}\n'
                                  f"__results.time__=1.0\n__results.note__={value}\n")
    assert main(["parse", str(folder)]) == 0
    captured = capsys.readouterr()
    assert "2 protocol line(s) with a value that is not JSON" in captured.err
    assert main(["results", "copy", str(folder), str(tmp_path / "a.db")]) == 0
    capsys.readouterr()
    _stored_attempt(str(tmp_path / "b.db"))
    with sqlite3.connect(tmp_path / "b.db") as conn:
        conn.execute("UPDATE attempts SET params = ? WHERE exp_id = 'bad'",
                     (f'{{"exp.model": {value}, "n": 12345678901234567890}}',))
    conn.close()
    for argv in (["parse", str(tmp_path / "b.db")],
                 ["results", "copy", str(tmp_path / "b.db"), str(tmp_path / "c.db")]):
        error = _one_error_or_fine(capsys, argv)
        assert "the row of experiment bad, attempt 1: its params is not JSON" in error


def test_7_trace_of_a_log_reads_only_the_planned_trace(tmp_path, capsys):
    from dlbs.cli.main import main
    from dlbs.results.protocol import HEADER_END

    secret = _secret(tmp_path)
    log = tmp_path / "a.log"
    log.write_text("# dlbs 0.1.0: experiment e1, attempt 1, started t\n"
                   '__exp.id__="e1"\n__exp.trace_level__="step"\n'
                   f'__exp.trace_file__="logs/a.trace.json.gz"\n{HEADER_END}\n'
                   f'__results.trace_file__="{secret}"\n__results.time__=1.0\n')
    assert main(["trace", str(log)]) == 2
    error = capsys.readouterr().err
    assert "names no trace file" in error and SECRET_TEXT not in error
