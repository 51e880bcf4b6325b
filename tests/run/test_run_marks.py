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


# -- a scheduler's submission: its name, recorded with the job id -----------------------------
def test_a_submission_name_names_its_experiment_and_a_token():
    name = marks.submission_name("exp/1 a")
    assert name.startswith("dlbs-exp-1-a-") and len(name) == len("dlbs-exp-1-a-") + 8
    assert marks.name_mismatch(name, "exp/1 a") is None
    assert marks.name_mismatch(name, "exp/1 a", array=False) is None
    assert marks.submission_name("exp/1 a") != name
    array = marks.submission_name(None)
    assert array.startswith("dlbs-array-") and marks.name_mismatch(array, "x", True) is None


@pytest.mark.parametrize(("name", "array", "reason"), [
    (None, None, "recorded no submission name"),
    ("", None, "recorded no submission name"),
    ("other", None, "'other' is not the name of a submission of experiment e1"),
    ("dlbs-e2-1234abcd", None, "is not the name of a submission of experiment e1"),
    ("dlbs-e1-1234abcd", True, "(dlbs names it dlbs-array-<token>)"),
    ("dlbs-array-1234abcd", False, "(dlbs names it dlbs-e1-<token>)"),
    ("dlbs-e1-1234ABCD", None, "is not the name"),
    ("dlbs-e1-1234abcd0", None, "is not the name"),
    ("dlbs-e1-", None, "is not the name"),
])
def test_a_name_that_is_not_the_experiments_submission_says_why(name, array, reason):
    assert reason in marks.name_mismatch(name, "e1", array)


@pytest.mark.parametrize(("text", "decoded"), [
    ("4242 dlbs-e1-1234abcd", ("4242", "dlbs-e1-1234abcd")),
    ("4242_3 dlbs-array-1234abcd", ("4242_3", "dlbs-array-1234abcd")),
    ("4242", ("4242", None)),             # recorded by an older dlbs
    (" 4242  ", ("4242", None)),
])
def test_a_submitted_job_reads_back(text, decoded):
    assert marks.decode_submitted(text) == decoded


@given(job_id=st.from_regex(r"[0-9]{1,9}(_[0-9]{1,4})?", fullmatch=True),
       label=st.text(min_size=1, max_size=80))
def test_a_submitted_job_reads_back_as_it_was_written(job_id, label):
    name = marks.submission_name(label)
    assert marks.decode_submitted(marks.submitted(job_id, name)) == (job_id, name)
