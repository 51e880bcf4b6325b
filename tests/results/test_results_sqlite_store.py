"""What only the SQLite store does: its file, WAL, versions, migrations, foreign files.

The protocol every store offers is tested on both stores in test_results_store.py.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers_results import REPO

from dlbs.errors import ResultsError
from dlbs.results import sqlite_store as store_module
from dlbs.results.protocol import STATUSES
from dlbs.results.sqlite_store import is_sqlite_file
from dlbs.results.store import SCHEMA_VERSION, STARTED, ResultsStore, open_store

PARAMS = {"exp.model": "resnet50", "exp.replica_batch": 32, "exp.num_gpus": 1}


@pytest.fixture
def db(tmp_path: Path) -> ResultsStore:
    with open_store(tmp_path / "logs" / "results.db") as store:
        yield store


def test_new_database_has_version_wal_and_tables(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "results.db"
    open_store(path).close()
    assert is_sqlite_file(path)
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    finally:
        connection.close()
    assert {"attempts", "experiments", "oom_limits"} <= names


def test_missing_database_without_create(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="no results database at"):
        open_store(tmp_path / "none.db", create=False)
    assert not (tmp_path / "none.db").exists()


def test_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    open_store(path).close()
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    connection.close()
    before = path.read_bytes()
    with pytest.raises(ResultsError, match=f"schema version {SCHEMA_VERSION + 1}; this dlbs "
                                           f"reads versions up to {SCHEMA_VERSION}") as error:
        open_store(path)
    assert error.value.hint and "newer dlbs" in error.value.hint
    assert path.read_bytes() == before


def test_older_schema_is_migrated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "results.db"
    with open_store(path) as store:
        store.record_start("e1", 1, PARAMS)
        store.record_end("e1", 1, "ok", results={"results.time": 5.0})

    def add_notes_column(connection: sqlite3.Connection) -> None:
        connection.execute("ALTER TABLE attempts ADD COLUMN notes TEXT DEFAULT 'migrated'")

    monkeypatch.setattr(store_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(store_module, "MIGRATIONS", {SCHEMA_VERSION: add_notes_column})
    with open_store(path) as store:
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
    open_store(path).close()

    def broken(connection: sqlite3.Connection) -> None:
        connection.execute("ALTER TABLE attempts ADD COLUMN half TEXT")
        connection.execute("THIS IS NOT SQL")

    monkeypatch.setattr(store_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(store_module, "MIGRATIONS", {SCHEMA_VERSION: broken})
    with pytest.raises(ResultsError, match="cannot open"):
        open_store(path)
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
    open_store(path).close()
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(store_module, "MIGRATIONS", {})
    with pytest.raises(ResultsError, match="cannot migrate"):
        open_store(path)


def test_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE t (x)")
    connection.commit()
    connection.close()
    before = path.read_bytes()
    with pytest.raises(ResultsError, match="not a dlbs results database"):
        open_store(path)
    assert path.read_bytes() == before
    assert not Path(str(path) + "-wal").exists()


def test_foreign_application_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA application_id=1234")
    connection.close()
    with pytest.raises(ResultsError, match="application id 0x4d2"):
        open_store(path)


def test_file_that_is_not_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    path.write_text("these are not the bytes of a database\n" * 100)
    with pytest.raises(ResultsError, match=r"results database .*results\.db: cannot open"):
        open_store(path)


def test_reader_sees_commits_of_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    with open_store(path) as writer, open_store(path) as reader:
        writer.record_start("e1", 1, PARAMS)
        assert reader.latest_status("e1") == STARTED
        writer.record_end("e1", 1, "ok")
        assert reader.latest_statuses() == {"e1": "ok"}


def test_many_processes_create_one_database_at_once(tmp_path: Path) -> None:
    # Several runs may open a fresh database at the same moment: one creates it, the others
    # see it created (the version is read again under the write lock).
    path = tmp_path / "results.db"
    code = ("import sys; from dlbs.results.store import open_store; "
            "s = open_store(sys.argv[1]); s.record_start(sys.argv[2], 1, {}); s.close()")
    environment = dict(os.environ, PYTHONPATH=str(REPO))
    processes = [subprocess.Popen([sys.executable, "-c", code, str(path), f"e{index}"],
                                  env=environment, stderr=subprocess.PIPE, text=True)
                 for index in range(4)]
    for process in processes:
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
    with open_store(path) as store:
        assert sorted(store.latest_statuses()) == ["e0", "e1", "e2", "e3"]
        assert store.schema_version == SCHEMA_VERSION


def test_reader_opens_while_a_writer_holds_a_transaction(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    with open_store(path) as writer:
        writer.record_start("e1", 1, PARAMS)
        writer._conn.execute("BEGIN IMMEDIATE")   # a write in progress, as mid-sweep
        try:
            began = time.monotonic()
            with open_store(path, create=False) as reader:
                assert reader.latest_status("e1") == STARTED
            assert time.monotonic() - began < 5
        finally:
            writer._conn.execute("ROLLBACK")


@pytest.mark.parametrize("status", STATUSES)
def test_schema_accepts_every_status(db: ResultsStore, status: str) -> None:
    # The schema spells the statuses out; a new status needs a schema migration.
    db.record_attempt("e1", 1, PARAMS, status)
    assert db.latest_status("e1") == status
