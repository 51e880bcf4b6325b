"""The SQLite results store: attempts, statuses, jobs, OOM limits, versions, kill -9."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers_results import REPO

from dlbs.errors import ResultsError
from dlbs.results import store as store_module
from dlbs.results.protocol import STATUSES
from dlbs.results.store import SCHEMA_VERSION, STARTED, ResultsStore, is_sqlite_file

PARAMS = {"exp.model": "resnet50", "exp.replica_batch": 32, "exp.num_gpus": 1}


@pytest.fixture
def db(tmp_path: Path) -> ResultsStore:
    with ResultsStore(tmp_path / "logs" / "results.db") as store:
        yield store


def test_new_database_has_version_wal_and_tables(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "results.db"
    ResultsStore(path).close()
    assert is_sqlite_file(path)
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    finally:
        connection.close()
    assert {"attempts", "experiments", "oom_limits"} <= names


def test_attempt_lifecycle(db: ResultsStore) -> None:
    assert db.latest_status("e1") is None and db.latest_attempt("e1") is None
    assert db.next_attempt("e1") == 1
    db.record_start("e1", 1, PARAMS, log_path="logs/e1.log", environment={"host": "h"},
                    started_at="2026-01-01T00:00:00.000+00:00")
    assert db.latest_status("e1") == STARTED
    assert [a.exp_id for a in db.unfinished()] == ["e1"]
    db.record_end("e1", 1, "failure", status_msg="CUDA out of memory",
                  results={"results.time": -1}, ended_at="2026-01-01T00:01:00.000+00:00")
    assert db.latest_status("e1") == "failure" and db.unfinished() == []
    assert db.next_attempt("e1") == 2
    db.record_start("e1", 2, PARAMS, log_path="logs/e1.2.log")
    db.record_end("e1", 2, "ok", results={"results.time": 12.5, "results.status": "ok"})
    latest = db.latest_attempt("e1")
    assert latest is not None and latest.attempt == 2 and latest.status == "ok"
    assert [a.attempt for a in db.attempts("e1")] == [1, 2]
    first = db.attempts("e1")[0]
    assert first.environment == {"host": "h"} and first.params == PARAMS
    assert first.status_msg == "CUDA out of memory"
    assert first.started_at == "2026-01-01T00:00:00.000+00:00"
    assert db.latest_statuses() == {"e1": "ok"}
    [experiment] = list(db.experiments())
    assert experiment["results.time"] == 12.5 and experiment["results.attempt"] == 2
    assert experiment["results.log_file"] == "logs/e1.2.log"
    assert experiment["exp.model"] == "resnet50" and experiment["exp.id"] == "e1"


def test_stored_status_wins_over_the_backend_status(db: ResultsStore) -> None:
    db.record_start("e1", 1, PARAMS)
    db.record_end("e1", 1, "timeout", status_msg="ran past exp.timeout=60",
                  results={"results.status": "ok", "results.status_msg": "x"})
    [experiment] = list(db.experiments())
    assert experiment["results.status"] == "timeout"
    assert experiment["results.status_msg"] == "ran past exp.timeout=60"


def test_skipped_attempt_in_one_write(db: ResultsStore) -> None:
    db.record_attempt("e2", 1, PARAMS, "skipped", status_msg="replica batch 64 >= OOM limit 32")
    attempt = db.latest_attempt("e2")
    assert attempt is not None and attempt.ended and attempt.status == "skipped"
    assert attempt.started_at == attempt.ended_at


@pytest.mark.parametrize("status", ["OK", "started", "", "success"])
def test_unknown_status_is_refused(db: ResultsStore, status: str) -> None:
    db.record_start("e1", 1, PARAMS)
    with pytest.raises(ResultsError, match="unknown experiment status"):
        db.record_end("e1", 1, status)
    assert db.latest_status("e1") == STARTED


def test_attempt_numbers_are_unique_and_ends_need_a_start(db: ResultsStore) -> None:
    db.record_start("e1", 1, PARAMS)
    with pytest.raises(ResultsError, match="already has attempt 1"):
        db.record_start("e1", 1, PARAMS)
    with pytest.raises(ResultsError, match="no open attempt 2"):
        db.record_end("e1", 2, "ok")
    db.record_end("e1", 1, "ok")
    with pytest.raises(ResultsError, match="no open attempt 1"):
        db.record_end("e1", 1, "failure")
    assert db.latest_status("e1") == "ok"


def test_slurm_jobs_to_reattach(db: ResultsStore) -> None:
    db.record_start("e1", 1, PARAMS)
    db.set_job_id("e1", 1, "4242")
    db.record_start("e2", 1, PARAMS, job_id="4243")
    db.record_start("e3", 1, PARAMS)
    assert sorted((a.exp_id, a.job_id) for a in db.pending_jobs()) == [
        ("e1", "4242"), ("e2", "4243")]
    assert [a.exp_id for a in db.unfinished()] == ["e3"]
    db.record_end("e1", 1, "cancelled", status_msg="slurm: CANCELLED by 0")
    assert [a.exp_id for a in db.pending_jobs()] == ["e2"]
    with pytest.raises(ResultsError, match="no open attempt"):
        db.set_job_id("e1", 1, "1")


def test_oom_limit_keeps_the_smallest_batch(db: ResultsStore) -> None:
    key = ("pytorch", "gpu", "resnet50", "float32", "training")
    assert db.oom_limit(*key) is None
    db.record_oom(*key, 256, exp_id="a")
    db.record_oom(*key, 128, exp_id="b")
    db.record_oom(*key, 512, exp_id="c")
    assert db.oom_limit(*key) == 128
    assert db.oom_limit("pytorch", "gpu", "resnet50", "float16", "training") is None
    assert db.oom_limit("pytorch", "gpu", "resnet50", "float32", "inference") is None
    [limit] = db.oom_limits()
    assert limit["replica_batch"] == 128 and limit["exp_id"] == "b"


def test_oom_limits_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    with ResultsStore(path) as store:
        store.record_oom("mxnet", "gpu", "vgg16", "float16", "training", 64)
    with ResultsStore(path, create=False) as store:
        assert store.oom_limit("mxnet", "gpu", "vgg16", "float16", "training") == 64


def test_missing_database_without_create(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="no results database at"):
        ResultsStore(tmp_path / "none.db", create=False)
    assert not (tmp_path / "none.db").exists()


def test_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    ResultsStore(path).close()
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    connection.close()
    before = path.read_bytes()
    with pytest.raises(ResultsError, match=f"schema version {SCHEMA_VERSION + 1}; this dlbs "
                                           f"reads versions up to {SCHEMA_VERSION}") as error:
        ResultsStore(path)
    assert error.value.hint and "newer dlbs" in error.value.hint
    assert path.read_bytes() == before


def test_older_schema_is_migrated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "results.db"
    with ResultsStore(path) as store:
        store.record_start("e1", 1, PARAMS)
        store.record_end("e1", 1, "ok", results={"results.time": 5.0})

    def add_notes_column(connection: sqlite3.Connection) -> None:
        connection.execute("ALTER TABLE attempts ADD COLUMN notes TEXT DEFAULT 'migrated'")

    monkeypatch.setattr(store_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(store_module, "MIGRATIONS", {SCHEMA_VERSION: add_notes_column})
    with ResultsStore(path) as store:
        assert store.schema_version == SCHEMA_VERSION + 1
        assert store.latest_status("e1") == "ok"
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("SELECT notes FROM attempts").fetchone()[0] == "migrated"
    finally:
        connection.close()


def test_failed_migration_leaves_the_old_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "results.db"
    ResultsStore(path).close()

    def broken(connection: sqlite3.Connection) -> None:
        connection.execute("ALTER TABLE attempts ADD COLUMN half TEXT")
        connection.execute("THIS IS NOT SQL")

    monkeypatch.setattr(store_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(store_module, "MIGRATIONS", {SCHEMA_VERSION: broken})
    with pytest.raises(ResultsError, match="cannot open"):
        ResultsStore(path)
    monkeypatch.undo()
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        columns = [row[1] for row in connection.execute("PRAGMA table_info(attempts)")]
    finally:
        connection.close()
    assert "half" not in columns


def test_unknown_older_version_is_refused(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "results.db"
    ResultsStore(path).close()
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(store_module, "MIGRATIONS", {})
    with pytest.raises(ResultsError, match="cannot migrate"):
        ResultsStore(path)


def test_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE t (x)")
    connection.commit()
    connection.close()
    before = path.read_bytes()
    with pytest.raises(ResultsError, match="not a dlbs results database"):
        ResultsStore(path)
    assert path.read_bytes() == before
    assert not Path(str(path) + "-wal").exists()


def test_foreign_application_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA application_id=1234")
    connection.close()
    with pytest.raises(ResultsError, match="application id 0x4d2"):
        ResultsStore(path)


def test_file_that_is_not_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    path.write_text("these are not the bytes of a database\n" * 100)
    with pytest.raises(ResultsError, match=r"results database .*results\.db: cannot open"):
        ResultsStore(path)


def test_reader_sees_commits_of_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    with ResultsStore(path) as writer, ResultsStore(path) as reader:
        writer.record_start("e1", 1, PARAMS)
        assert reader.latest_status("e1") == STARTED
        writer.record_end("e1", 1, "ok")
        assert reader.latest_statuses() == {"e1": "ok"}


# -- kill -9 in the middle of writes -----------------------------------------------------

_WRITER = textwrap.dedent("""
    import sys
    from dlbs.results.store import ResultsStore

    path, first = sys.argv[1], int(sys.argv[2])
    store = ResultsStore(path)
    i = first
    while True:
        exp_id = f"e{i:06d}"
        params = {"exp.model": "resnet50", "exp.replica_batch": i, "exp.pad": "x" * 2000}
        store.record_start(exp_id, 1, params, log_path=f"logs/{exp_id}.log")
        print("started", i, flush=True)
        store.record_end(exp_id, 1, "ok" if i % 3 else "failure",
                         results={"results.time": float(i + 1), "results.time_data": [1.0] * 200})
        if i % 7 == 0:
            store.record_oom("pytorch", "gpu", "resnet50", "float32", "training", 10**6 - i)
        print("ended", i, flush=True)
        i += 1
""")


def _run_writer_and_kill(path: Path, first: int, kill_after: int) -> tuple[set[int], set[int]]:
    environment = dict(os.environ, PYTHONPATH=str(REPO))
    process = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), str(first)],
        stdout=subprocess.PIPE, text=True, env=environment,
    )
    started: set[int] = set()
    ended: set[int] = set()
    assert process.stdout is not None
    try:
        for line in process.stdout:
            word, number = line.split()
            (started if word == "started" else ended).add(int(number))
            if len(ended) >= kill_after:
                # SIGKILL while the writer is somewhere inside its next transactions.
                process.send_signal(signal.SIGKILL)
                break
    finally:
        process.kill()
        process.wait(timeout=30)
        process.stdout.close()
    assert process.returncode == -signal.SIGKILL
    return started, ended


def test_kill_9_mid_writes_keeps_every_commit_and_consistency(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    all_started: set[int] = set()
    all_ended: set[int] = set()
    interrupted: set[int] = set()
    first = 0
    for kill_after in (40, 75, 130):
        started, ended = _run_writer_and_kill(path, first, kill_after)
        all_started |= started
        all_ended |= ended
        with ResultsStore(path) as store:
            assert store.integrity_check() == "ok"
            attempts = {int(a.exp_id[1:]): a for a in store.attempts()}
            # Nothing reported as committed is lost...
            assert all_started <= set(attempts)
            for number in all_ended:
                attempt = attempts[number]
                assert attempt.status == ("ok" if number % 3 else "failure")
                assert attempt.results["results.time"] == float(number + 1)
                assert len(attempt.results["results.time_data"]) == 200
                assert attempt.params["exp.replica_batch"] == number
            # ...and every row is whole: ended with its results, or started only.
            for number, attempt in attempts.items():
                if attempt.status == "interrupted":
                    assert number in interrupted and attempt.results == {}
                elif attempt.ended:
                    assert attempt.results["results.time"] == float(number + 1)
                else:
                    assert attempt.status is None and attempt.results == {}
            # At most the attempt in flight is open; the next run picks it up.
            assert len(store.unfinished()) <= 1
            # The OOM write follows record_end: it is there for every attempt reported
            # ended, and possibly for the one ended just before the kill.
            limit = store.oom_limit("pytorch", "gpu", "resnet50", "float32", "training")
            reported = max(n for n in all_ended if n % 7 == 0)
            committed = max(n for n, a in attempts.items() if n % 7 == 0 and a.ended)
            assert limit is not None and 10**6 - committed <= limit <= 10**6 - reported
            for attempt in store.unfinished():
                interrupted.add(int(attempt.exp_id[1:]))
                store.record_end(attempt.exp_id, attempt.attempt, "interrupted",
                                 status_msg="dlbs was killed")
            first = max(attempts) + 1
    assert len(all_ended) >= 40 + 75 + 130


def test_many_processes_create_one_database_at_once(tmp_path: Path) -> None:
    # Several runs may open a fresh database at the same moment: one creates it, the others
    # see it created (the version is read again under the write lock).
    path = tmp_path / "results.db"
    code = ("import sys; from dlbs.results.store import ResultsStore; "
            "s = ResultsStore(sys.argv[1]); s.record_start(sys.argv[2], 1, {}); s.close()")
    environment = dict(os.environ, PYTHONPATH=str(REPO))
    processes = [subprocess.Popen([sys.executable, "-c", code, str(path), f"e{index}"],
                                  env=environment, stderr=subprocess.PIPE, text=True)
                 for index in range(4)]
    for process in processes:
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
    with ResultsStore(path) as store:
        assert sorted(store.latest_statuses()) == ["e0", "e1", "e2", "e3"]
        assert store.schema_version == SCHEMA_VERSION


def test_reader_opens_while_a_writer_holds_a_transaction(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    with ResultsStore(path) as writer:
        writer.record_start("e1", 1, PARAMS)
        writer._conn.execute("BEGIN IMMEDIATE")   # a write in progress, as mid-sweep
        try:
            began = time.monotonic()
            with ResultsStore(path, create=False) as reader:
                assert reader.latest_status("e1") == STARTED
            assert time.monotonic() - began < 5
        finally:
            writer._conn.execute("ROLLBACK")


@pytest.mark.parametrize("status", STATUSES)
def test_schema_accepts_every_status(db: ResultsStore, status: str) -> None:
    # The schema spells the statuses out; a new status needs a schema migration.
    db.record_attempt("e1", 1, PARAMS, status)
    assert db.latest_status("e1") == status
