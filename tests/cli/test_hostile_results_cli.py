"""Issue 14 for the reading commands: databases and logs that are not what they seem.

Each test reproduces one defect of the issue (its number in the test's name) as a user meets
it: `dlbs parse` and `dlbs report` as subprocesses, their exit status and stderr.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_plan_cli import assert_one_error_line
from tests.conftest import REPO

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=2", "-P", "exp.num_warmup_batches=0"]
LOG = ('__exp.id__="a"\n__exp.framework__="dummy"\n__exp.model__="m"\n__results.status__="ok"\n'
       '__results.time__=1.5\n__results.throughput__=2.0\n')


@pytest.fixture
def results_db(dlbs_cli, tmp_path) -> Path:
    """A real results database of one ok experiment, WAL files checkpointed away."""
    result = dlbs_cli("run", *DUMMY, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    db = tmp_path / "logs" / "results.db"
    assert db.is_file() and not (tmp_path / "logs" / "results.db-wal").exists()
    return db


# -- 4: an empty or garbage database named directly --------------------------------------------
@pytest.mark.parametrize("content", [b"", os.urandom(4096), b"SQLite format 3\x00" + b"\x00" * 84])
@pytest.mark.parametrize("command", ["report", "parse"])
def test_4_an_empty_or_garbage_database_is_an_error(dlbs_cli, tmp_path, content, command):
    db = tmp_path / "results.db"
    db.write_bytes(content)
    result = dlbs_cli(command, str(db), cwd=tmp_path)
    assert_one_error_line(result, f"results database {db}: cannot open")
    assert "No ok experiments" not in result.stdout


def test_4_the_same_error_as_run(dlbs_cli, tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "results.db").write_bytes(os.urandom(4096))
    run = dlbs_cli("run", *DUMMY, cwd=tmp_path)
    report = dlbs_cli("report", "logs/results.db", cwd=tmp_path)
    assert_one_error_line(run, "results database logs/results.db: cannot open: file is not a "
                               "database")
    assert_one_error_line(report, "results database logs/results.db: cannot open: file is not a "
                                  "database")


# -- 5: a database on read-only media ---------------------------------------------------------
@pytest.fixture
def read_only_folder(results_db):
    """The database's folder made immutable (as read-only media are, even for root)."""
    folder = results_db.parent
    subprocess.run(["chattr", "+i", str(results_db), str(folder)], check=True)
    try:
        assert not os.access(folder, os.W_OK)
        yield results_db
    finally:
        subprocess.run(["chattr", "-i", str(results_db), str(folder)], check=True)


@pytest.mark.parametrize("command", [["report"], ["parse"], ["report", "--format", "json"]])
def test_5_a_database_on_read_only_media_is_read(dlbs_cli, tmp_path, read_only_folder, command):
    result = dlbs_cli(*command, str(read_only_folder), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "resnet50" in result.stdout


def test_5_readers_open_the_database_read_only(tmp_path, results_db):
    from dlbs.errors import ResultsError
    from dlbs.results.sources import FULL, load_experiments
    from dlbs.results.store import Attempt, open_store

    before = results_db.read_bytes()
    assert [e["exp.model"] for e in load_experiments([results_db], FULL).experiments] == [
        "resnet50"]
    with open_store(results_db, read_only=True) as store:
        assert len(store.attempts()) == 1
        with pytest.raises(ResultsError, match="opened for reading only"):
            store.record_attempts([Attempt("x", 1, "ok", None)])
    assert results_db.read_bytes() == before
    with sqlite3.connect(results_db) as conn:
        assert conn.execute("SELECT count(*) FROM attempts").fetchone()[0] == 1


# -- 16: a protocol value nested 200,000 deep --------------------------------------------------
@pytest.mark.parametrize("command", [["parse"], ["report"], ["parse", "-o", "out.csv"]])
def test_16_deeply_nested_values_are_bounded(dlbs_cli, tmp_path, command):
    log = tmp_path / "a.log"
    log.write_text(LOG + "__results.deep__=" + "[" * 200_000 + "]" * 200_000 + "\n"
                   + "__results.shallow__=" + "[" * 300 + "]" * 300 + "\n")
    result = dlbs_cli(*command, str(log), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr


# -- 8 (logs): integers beyond 64 bits and 1e308 are read and written exactly ------------------
def test_8_logs_read_big_numbers_exactly(dlbs_cli, tmp_path):
    log = tmp_path / "a.log"
    log.write_text(LOG + f"__results.big__={10**30}\n__results.neg__={-(10**25)}\n"
                         "__results.huge__=1e308\n__exp.seed__=123456789012345678901234567890\n")
    result = dlbs_cli("parse", str(log), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (experiment,) = json.loads(result.stdout)["experiments"]
    assert experiment["results.big"] == 10**30 and experiment["results.neg"] == -(10**25)
    assert experiment["results.huge"] == 1e308
    assert experiment["exp.seed"] == 123456789012345678901234567890
    csv = dlbs_cli("parse", str(log), "-o", "out.csv", cwd=tmp_path)
    assert csv.returncode == 0, csv.stderr
    assert str(10**30) in (tmp_path / "out.csv").read_text()
    report = dlbs_cli("report", str(log), "--format", "json", cwd=tmp_path)
    assert report.returncode == 0, report.stderr


# -- 17: a FIFO named *.log --------------------------------------------------------------------
@pytest.mark.parametrize("command", ["parse", "report"])
def test_17_a_fifo_named_log_never_hangs(dlbs_cli, tmp_path, command):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.log").write_text(LOG)
    os.mkfifo(folder / "b.log")  # no writer: reading it would wait forever
    found = dlbs_cli(command, str(folder), cwd=tmp_path, timeout=60)
    assert found.returncode == 0, found.stderr
    named = dlbs_cli(command, str(folder / "b.log"), cwd=tmp_path, timeout=60)
    assert_one_error_line(named, "b.log: not a regular file")


# -- 18: closed stdout -------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["report"], ["parse"], ["report", "--format", "html"]])
def test_18_closed_stdout_exits_quietly(tmp_path, command):
    (tmp_path / "a.log").write_text(LOG)
    script = f"{sys.executable} -m dlbs.cli.main {' '.join(command)} a.log >&-"
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
