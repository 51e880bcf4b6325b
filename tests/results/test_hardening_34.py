"""Issue 34 for the results store, copies, parse and what rows and backend output may do.

Each test reproduces one class of the issue (its item number in the test's name) with the
example and the variants around it: a user's command as a subprocess where hanging is the
defect, in-process otherwise.
"""

from __future__ import annotations

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


@pytest.mark.parametrize(("column", "text"), MALFORMED)
def test_11_a_malformed_row_is_one_error_naming_it(store_location, tmp_path, capsys, column,
                                                   text):
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
