"""What the store computes when results are stored: summaries, report rows, coded views.

Summaries came with schema version 2, report rows and coded views with version 3; the
migrations from versions 1 and 2 are tested here too.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import orjson
import pytest

from dlbs.results.schema import summary_row
from dlbs.results.store import SCHEMA_VERSION, Attempt, open_store
from dlbs.results.stored_columns import StorePart

PARAMS = {"exp.model": "resnet50", "exp.replica_batch": 32, "exp.num_gpus": 2,
          "exp.effective_batch": 64, "exp.docker": True, "exp.num_batches": 1,
          "pytorch.extra_args": ["--channels_last", "true"]}
SAMPLES = [10.0, 12.0, 11.0, 13.0, 14.0]

# Version 1 of the layout, as the dlbs of that version created it: the migration test
# builds such a database with it (not with today's code, which writes version 3).
SCHEMA_V1 = """
CREATE TABLE attempts (
    exp_id      TEXT    NOT NULL,
    attempt     INTEGER NOT NULL CHECK (attempt >= 1),
    status      TEXT    CHECK (status IS NULL OR status IN
                        ('ok', 'failure', 'skipped', 'interrupted', 'timeout', 'cancelled')),
    status_msg  TEXT,
    params      TEXT    NOT NULL,
    results     TEXT,
    log_path    TEXT,
    environment TEXT,
    job_id      TEXT,
    started_at  TEXT    NOT NULL,
    ended_at    TEXT,
    PRIMARY KEY (exp_id, attempt),
    CHECK ((status IS NULL) = (ended_at IS NULL))
);
CREATE INDEX attempts_open ON attempts (ended_at) WHERE ended_at IS NULL;
CREATE VIEW experiments AS
    SELECT a.* FROM attempts AS a
    WHERE a.attempt = (SELECT MAX(b.attempt) FROM attempts AS b WHERE b.exp_id = a.exp_id);
CREATE TABLE oom_limits (
    framework     TEXT    NOT NULL,
    device_type   TEXT    NOT NULL,
    model         TEXT    NOT NULL,
    dtype         TEXT    NOT NULL,
    phase         TEXT    NOT NULL,
    replica_batch INTEGER NOT NULL,
    exp_id        TEXT,
    recorded_at   TEXT    NOT NULL,
    PRIMARY KEY (framework, device_type, model, dtype, phase)
);
PRAGMA application_id=1684824691;
PRAGMA user_version=1;
"""

# Version 2, as the dlbs of that version created it.
SCHEMA_V2 = """
CREATE TABLE attempts (
    exp_id      TEXT    NOT NULL,
    attempt     INTEGER NOT NULL CHECK (attempt >= 1),
    status      TEXT    CHECK (status IS NULL OR status IN
                        ('ok', 'failure', 'skipped', 'interrupted', 'timeout', 'cancelled')),
    status_msg  TEXT,
    log_path    TEXT,
    job_id      TEXT,
    started_at  TEXT    NOT NULL,
    ended_at    TEXT,
    time_count  INTEGER,
    time_mean   REAL,
    time_std    REAL,
    time_median REAL,
    time_p90    REAL,
    time_p95    REAL,
    time_p99    REAL,
    time_min    REAL,
    time_max    REAL,
    throughput  REAL,
    param_base  INTEGER,
    stats_warnings TEXT,
    environment TEXT,
    summary     TEXT,
    param_delta TEXT,
    time_data   BLOB,
    params      TEXT    NOT NULL,
    results     TEXT,
    PRIMARY KEY (exp_id, attempt),
    CHECK ((status IS NULL) = (ended_at IS NULL))
);
CREATE INDEX attempts_open ON attempts (ended_at) WHERE ended_at IS NULL;
CREATE VIEW experiments AS
    SELECT a.* FROM attempts AS a
    WHERE a.attempt = (SELECT MAX(b.attempt) FROM attempts AS b WHERE b.exp_id = a.exp_id);
CREATE TABLE param_bases (
    id          INTEGER PRIMARY KEY,
    params      TEXT    NOT NULL
);
CREATE TABLE oom_limits (
    framework     TEXT    NOT NULL,
    device_type   TEXT    NOT NULL,
    model         TEXT    NOT NULL,
    dtype         TEXT    NOT NULL,
    phase         TEXT    NOT NULL,
    replica_batch INTEGER NOT NULL,
    exp_id        TEXT,
    recorded_at   TEXT    NOT NULL,
    PRIMARY KEY (framework, device_type, model, dtype, phase)
);
PRAGMA application_id=1684824691;
PRAGMA user_version=2;
"""


def _json(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def test_record_end_computes_the_summary_columns(tmp_path: Path) -> None:
    with open_store(tmp_path / "results.db") as store:
        store.record_start("e1", 1, PARAMS, started_at="2026-01-01T10:00:00+00:00")
        store.record_end("e1", 1, "ok", results={
            "results.time_data": SAMPLES, "results.time": 12.0,
            "results.time_std": float(np.std(SAMPLES)), "results.mem_peak": 900.0})
        store.record_start("e2", 1, PARAMS)        # still running: no summary yet
    connection = sqlite3.connect(tmp_path / "results.db")
    try:
        row = connection.execute(
            "SELECT time_count, time_mean, time_std, time_median, time_p99, throughput, "
            "stats_warnings, time_data, summary FROM attempts WHERE exp_id = 'e1'").fetchone()
        open_row = connection.execute(
            "SELECT summary, time_mean FROM attempts WHERE exp_id = 'e2'").fetchone()
    finally:
        connection.close()
    assert row[:6] == (5, 12.0, pytest.approx(np.std(SAMPLES, ddof=1)), 12.0,
                       pytest.approx(np.percentile(SAMPLES, 99)), pytest.approx(64000 / 12))
    assert row[6] is None                                   # ddof=0 std is no mismatch
    assert np.frombuffer(row[7], dtype="<f8").tolist() == SAMPLES
    summary = orjson.loads(row[8])
    assert summary["results.mem_peak"] == 900.0 and "results.time_data" not in summary
    assert open_row == (None, None)


def test_a_contradicted_backend_value_is_kept_as_a_warning(tmp_path: Path) -> None:
    with open_store(tmp_path / "results.db") as store:
        store.record_start("e1", 1, PARAMS)
        store.record_end("e1", 1, "ok", results={"results.time_data": SAMPLES,
                                                 "results.time_median": 11.0})
        [attempt] = store.attempts("e1")
    experiment = attempt.as_experiment()
    assert experiment["results.time_median"] == 12.0        # the engine's value wins
    assert attempt.results["results.time_median"] == 11.0    # the raw results stay as printed
    assert experiment["results.stats_warnings"] == [
        "results.time_median: the backend printed 11.0, its per-batch times give 12"]


def test_views_come_back_exactly_from_bases_and_differences(tmp_path: Path) -> None:
    variants = [dict(PARAMS, **{"exp.replica_batch": batch}) for batch in (16, 32, 64)]
    variants.append(dict(PARAMS, **{"exp.docker": 1}))       # 1 is not True in JSON
    variants.append(dict(PARAMS, **{"exp.docker": 1.0}))     # nor 1.0
    variants.append({key: value for key, value in PARAMS.items() if key != "exp.docker"})
    variants.append(dict(PARAMS, **{"exp.docker": None}))    # null, not absent
    variants.append({"exp.model": "other", "mxnet.kv_store": "device"})   # far: a new base
    with open_store(tmp_path / "results.db") as store:
        for index, params in enumerate(variants):
            store.record_start(f"e{index}", 1, params, environment={"host": "h"})
            store.record_end(f"e{index}", 1, "ok", results={
                "results.time": 1.0, "exp.model_title": "ResNet-50"})
        read = {stored.experiment["exp.id"]: stored for stored in store.summaries()}
        bases = store._conn.execute("SELECT count(*) FROM param_bases").fetchone()[0]
    assert bases == 2
    part = StorePart(str(tmp_path / "results.db"))
    ids = part.column("exp.id")
    for row, exp_id in enumerate(ids.values[code] for code in ids.codes.tolist()):
        expected = {key: value for key, value in read[exp_id].experiment.items()
                    if not key.startswith("results.")}
        expected.update({f"env.{key}": value for key, value in
                         read[exp_id].environment.items()})
        for key in part.keys():
            column = part.column(key)
            if key in expected:
                assert column.has()[row], (exp_id, key)
                got = column.values[column.codes[row]]
                assert _json(got) == _json(expected[key]), (exp_id, key)
            else:
                assert not column.has()[row], (exp_id, key)
    docker = part.column("exp.docker")
    assert len({docker.codes[row] for row in range(3, 6)}) == 3   # True, 1 and 1.0


def test_summaries_read_what_reports_need(tmp_path: Path) -> None:
    with open_store(tmp_path / "results.db") as store:
        store.record_start("e1", 1, PARAMS, environment={"gpu_model": "H100"})
        store.record_end("e1", 1, "failure", status_msg="boom")
        store.record_start("e1", 2, PARAMS, environment={"gpu_model": "H100"})
        store.record_end("e1", 2, "ok", results={"results.time_data": SAMPLES})
        every = store.summaries(with_samples=True)
        latest = store.summaries(latest_only=True)
    assert sorted(s.experiment["results.attempt"] for s in every) == [1, 2]
    ok = next(s for s in every if s.experiment["results.status"] == "ok")
    assert ok.samples is not None and ok.samples.tolist() == SAMPLES
    assert ok.environment == {"gpu_model": "H100"}
    assert ok.experiment["results.time"] == 12.0 and "results.time_data" not in ok.experiment
    [only] = latest
    assert only.experiment["results.attempt"] == 2 and only.samples is None


def test_record_attempts_is_one_transaction(tmp_path: Path) -> None:
    attempts = [Attempt(f"e{i}", 1, "ok", None, dict(PARAMS, trial=i),
                        {"results.time_data": SAMPLES}, f"e{i}.log", {}, None,
                        "2026-01-01T10:00:00+00:00", "2026-01-01T10:01:00+00:00")
                for i in range(3)]
    broken = [*attempts, Attempt("e0", 1, "ok", None, PARAMS)]   # a duplicate: all or nothing
    with open_store(tmp_path / "results.db") as store:
        with pytest.raises(Exception, match="already has attempt 1"):
            store.record_attempts(broken)
        assert store.latest_statuses() == {}
        assert store.record_attempts(attempts) == 3
        assert store.latest_statuses() == {"e0": "ok", "e1": "ok", "e2": "ok"}
        assert {s.experiment["results.time_median"] for s in store.summaries()} == {12.0}


def test_a_version_1_database_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    connection = sqlite3.connect(path)
    connection.executescript(SCHEMA_V1)
    connection.executemany("INSERT INTO attempts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           _old_rows())
    connection.commit()
    connection.close()
    _check_migrated(path, tmp_path)


def test_a_version_2_database_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    connection = sqlite3.connect(path)
    connection.executescript(SCHEMA_V2)
    names = ("exp_id, attempt, status, status_msg, params, results, log_path, environment, "
             "job_id, started_at, ended_at, summary, time_data, time_count, time_mean, "
             "time_std, time_median, time_p90, time_p95, time_p99, time_min, time_max, "
             "throughput, stats_warnings")
    for row in _old_rows():
        results = None if row[5] is None else orjson.loads(row[5])
        _, summary = summary_row(orjson.loads(row[4]), results, row[9])
        connection.execute(f"INSERT INTO attempts ({names}) VALUES "
                           f"({', '.join('?' * 24)})", (*row, *summary))
    # Version 2 wrote parameters as a base and differences; version 3 needs neither.
    connection.execute("INSERT INTO param_bases (id, params) VALUES (1, ?)", (_json(PARAMS),))
    connection.execute("UPDATE attempts SET param_base = 1, param_delta = '[{}, []]' "
                       "WHERE exp_id = 'e1'")
    connection.commit()
    connection.close()
    _check_migrated(path, tmp_path)


def _old_rows() -> list[tuple[object, ...]]:
    return [
        ("e1", 1, "failure", "CUDA out of memory", _json(PARAMS), _json({}), "e1.log",
         _json({"host": "h"}), None, "2026-01-01T10:00:00+00:00", "2026-01-01T10:00:05+00:00"),
        ("e1", 2, "ok", None, _json(PARAMS),
         _json({"results.time_data": SAMPLES, "results.time": 12.0,
                "results.end_time": "2026-01-01T10:01:00+00:00"}),
         "e1.2.log", _json({"host": "h"}), None, "2026-01-01T10:00:10+00:00",
         "2026-01-01T10:01:01+00:00"),
        ("e2", 1, None, None, _json(dict(PARAMS, **{"exp.model": "vgg16"})), None, "e2.log",
         _json({}), "4242", "2026-01-01T10:02:00+00:00", None),
    ]


def _check_migrated(path: Path, tmp_path: Path) -> None:
    with open_store(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 4
        assert store.integrity_check() == "ok"
        assert store.latest_statuses() == {"e1": "ok", "e2": "started"}
        assert [a.job_id for a in store.pending_jobs()] == ["4242"]
        [experiment] = [e for e in store.experiments() if e["exp.id"] == "e1"]
        assert experiment["results.time_std"] == pytest.approx(np.std(SAMPLES, ddof=1))
        by_attempt = {s.experiment["results.attempt"]: s for s in store.summaries()
                      if s.experiment["exp.id"] == "e1"}
        assert by_attempt[2].experiment["exp.model"] == "resnet50"
        assert by_attempt[2].experiment["results.time_count"] == 5
    # What reports read: the report rows and the views, in the old order of the rows.
    part = StorePart(str(path))
    assert part.column("results.status").values[1:3] == ["ok", "failure"]
    assert [part.column("results.status").values[code] for code in
            part.column("results.status").codes.tolist()] == ["failure", "ok", "started"]
    assert part.numbers("results.time_median")[1] == 12.0
    assert np.isnan(part.numbers("results.time_median")[[0, 2]]).all()
    models = part.column("exp.model")
    assert [models.values[code] for code in models.codes.tolist()] == [
        "resnet50", "resnet50", "vgg16"]
    hosts = part.column("env.host")
    assert hosts.has().tolist() == [True, True, False]
    assert part.samples(np.array([1]))[0].tolist() == SAMPLES
    assert part.recency.tolist()[1] > part.recency.tolist()[0]
    with open_store(path) as store:
        # The migrated database takes new attempts like a new one.
        store.record_end("e2", 1, "ok", results={"results.time_data": SAMPLES})
        store.record_start("e3", 1, PARAMS)
    fresh = tmp_path / "fresh.db"
    open_store(fresh).close()
    assert _layout(path) == _layout(fresh)


def _layout(path: Path) -> list[tuple[str, list[tuple[str, str]]]]:
    connection = sqlite3.connect(path)
    try:
        tables = [row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name")]
        return [(name, [(column[1], column[2]) for column in
                        connection.execute(f"PRAGMA table_info({name})")]) for name in tables]
    finally:
        connection.close()


def test_summaries_keep_integers_beyond_64_bits_exact(tmp_path: Path) -> None:
    params = dict(PARAMS, big=10**25)
    with open_store(tmp_path / "results.db") as store:
        store.record_start("e1", 1, PARAMS)
        store.record_end("e1", 1, "ok", results={"results.count": 2**70 + 1})
        store.record_start("e2", 1, params)          # a difference from e1's base
        store.record_end("e2", 1, "ok", results={"results.count": 3})
        read = {s.experiment["exp.id"]: s.experiment for s in store.summaries()}
    assert read["e1"]["results.count"] == 2**70 + 1
    assert read["e2"]["big"] == 10**25 and isinstance(read["e2"]["big"], int)
