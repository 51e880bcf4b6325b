"""Attempt marks (`dlbs.run.marks`): recorded in the database, read back by the next run."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlbs.results.store import open_store
from dlbs.run import marks
from tests.run.conftest import attempts

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=1", "-P", "exp.num_warmup_batches=0",
         "-P", "dummy.sleep=0"]


@given(target=st.sampled_from(["local", "docker"]), host=st.text(max_size=64),
       boot=st.text(max_size=40), pid=st.none() | st.integers(1, 2**22),
       start=st.none() | st.integers(0, 2**63 - 1))
def test_a_mark_reads_back_as_it_was_written(target, host, boot, pid, start):
    mark = {**marks.new_mark(target), "host": host, "boot": boot, "pid": pid, "start": start}
    text = marks.encode(mark)
    assert marks.is_mark(text)
    assert marks.decode(text) == mark


@pytest.mark.parametrize("job_id", [
    "4242", "4242_3", "pending:dlbs-x-1234abcd:", "run:", "run:{", "run:[]", "run:null",
    'run:{"target": 1, "token": "t"}', 'run:{"target": "local"}', "", None])
def test_what_is_not_a_readable_mark_reads_as_none(job_id):
    assert marks.decode(job_id) is None  # type: ignore[arg-type]


def test_a_new_mark_is_unique_and_names_this_host():
    first, second = marks.new_mark("local"), marks.new_mark("local")
    assert first["token"] != second["token"] and len(first["token"]) == 32
    assert first["host"] and first["boot"] == second["boot"]


def test_an_unreadable_mark_closes_its_attempt_without_a_traceback(run_dlbs, tmp_path):
    assert run_dlbs("run", *DUMMY).returncode == 0
    db = tmp_path / "logs" / "results.db"
    with open_store(db) as store:
        store.record_start("cut-off", 1, {"exp.id": "cut-off"}, job_id="run:{garbage")
        store.record_start("elsewhere", 1, {"exp.id": "elsewhere"},
                           job_id=marks.encode({**marks.new_mark("local"), "host": "far-away"}))
    result = run_dlbs("run", *DUMMY)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert ("cannot stop what experiment elsewhere, attempt 1 may have left running: "
            "experiment elsewhere ran on host far-away, not here") in result.stderr
    by_id = {row[0]: row[2:] for row in attempts(db)}
    assert by_id["cut-off"] == ("interrupted", "dlbs stopped before this attempt ended")
    assert by_id["elsewhere"] == ("interrupted", "dlbs stopped before this attempt ended")


def test_every_local_attempt_records_its_mark_with_its_process(run_dlbs, tmp_path):
    import sqlite3

    assert run_dlbs("run", *DUMMY).returncode == 0
    with sqlite3.connect(tmp_path / "logs" / "results.db") as conn:
        (job_id,) = conn.execute("SELECT job_id FROM attempts").fetchone()
    mark = json.loads(job_id[len(marks.PREFIX):])
    assert mark["target"] == "local" and mark["pid"] > 1 and isinstance(mark["start"], int)
