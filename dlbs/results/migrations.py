"""Upgrading an SQLite results database from an older schema version, one version at a time.

Each step runs inside the transaction that opened the database, so a failed migration leaves
the old version untouched. These are SQLite's: a PostgreSQL store was first made at version
4 (postgres_schema.py), so it has none yet; its next layout gets a step of its own. The
layouts of older versions are spelled out here as they were: a step must build exactly what
its version was, whatever today's schema.py says.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from dlbs.results import schema
from dlbs.results.sql_session import SQLITE, Session
from dlbs.results.view_codes import ViewCoder, view_of
from dlbs.util import exact_json

# Version 1's columns, which both migrations copy.
V1_NAMES = ["exp_id", "attempt", "status", "status_msg", "params", "results", "log_path",
            "environment", "job_id", "started_at", "ended_at"]
# Version 2's `attempts` and `param_bases`, as version 2 created them.
_ATTEMPTS_V2 = """CREATE TABLE {name} (
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
)"""
_BASES_V2 = """CREATE TABLE param_bases (
    id          INTEGER PRIMARY KEY,
    params      TEXT    NOT NULL
)"""
# Version 3's `attempts`, as version 3 created it.
_ATTEMPTS_V3 = """CREATE TABLE {name} (
    exp_id      TEXT    NOT NULL,
    attempt     INTEGER NOT NULL CHECK (attempt >= 1),
    report_row  BLOB,
    param_codes BLOB,
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
    time_data   BLOB,
    params      TEXT    NOT NULL,
    results     TEXT,
    PRIMARY KEY (exp_id, attempt),
    CHECK ((status IS NULL) = (ended_at IS NULL))
)"""
# Columns version 2 and version 3 share (what the 2 -> 3 step copies).
_V2_KEPT = [*V1_NAMES, *schema.SUMMARY_NAMES]


def _rebuild(conn: sqlite3.Connection, layout: str, columns: list[str]) -> None:
    """`attempts` rebuilt in `layout`'s column order, `columns` copied, rowids kept."""
    names = ", ".join(columns)
    conn.execute("DROP VIEW experiments")
    conn.execute(layout.format(name="attempts_new"))
    conn.execute(f"INSERT INTO attempts_new (rowid, {names}) SELECT rowid, {names} "
                 "FROM attempts ORDER BY rowid")
    conn.execute("DROP TABLE attempts")
    conn.execute("ALTER TABLE attempts_new RENAME TO attempts")
    conn.execute(schema.INDEX)
    conn.execute(schema.VIEW)


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Version 2: the summary columns, computed for every attempt.

    Version 2's parameter columns (`param_base`, `param_delta`) are left NULL, which version
    2 reads as "the whole `params`": the step to version 3 replaces them anyway.
    """
    _rebuild(conn, _ATTEMPTS_V2, V1_NAMES)
    conn.execute(_BASES_V2)
    assignments = ", ".join(f"{name} = ?" for name in schema.SUMMARY_NAMES)
    rows = conn.execute("SELECT rowid, params, results, started_at FROM attempts "
                        "ORDER BY rowid").fetchall()
    for rowid, params_text, results_text, started_at in rows:
        params = exact_json.loads(params_text)
        results = None if results_text is None else exact_json.loads(results_text)
        _, values = schema.summary_row(params, results, started_at)
        conn.execute(f"UPDATE attempts SET {assignments} WHERE rowid = ?", (*values, rowid))


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    """Version 3: `report_row` and `param_codes` (with their tables) replace `param_delta`.

    The summaries of version 2 are kept as they are; each attempt's view is coded from its
    parameters, summary and environment. Every row is written once, whole, into the new
    table (as a new database would hold it), in the order of the old one.
    """
    conn.execute("DROP VIEW experiments")
    conn.execute(_ATTEMPTS_V3.format(name="attempts_new"))
    conn.execute("DROP TABLE param_bases")
    for statement in schema.VIEW_TABLES.split(";\n"):
        conn.execute(statement)
    coder = ViewCoder()
    session = Session(conn, SQLITE)
    kept = ", ".join(_V2_KEPT)
    names = ", ".join(["rowid", *_V2_KEPT, *schema.VIEW_NAMES])
    insert = f"INSERT INTO attempts_new ({names}) VALUES ({', '.join('?' * (len(_V2_KEPT) + 4))})"
    position = {name: index + 1 for index, name in enumerate(_V2_KEPT)}
    # A cursor, not fetchall(): the rows of a large database do not fit in memory at once.
    for row in conn.execute(f"SELECT rowid, {kept} FROM attempts ORDER BY rowid"):
        value = {name: row[index] for name, index in position.items()}
        summary = None if value["summary"] is None else exact_json.loads(value["summary"])
        environment = None if value["environment"] is None else \
            exact_json.loads(value["environment"])
        view = view_of(exact_json.loads(value["params"]), summary, environment,
                       value["exp_id"])
        base, codes = coder.columns(session, view)
        conn.execute(insert, (*row, base, codes, schema.report_row(
            value["status"], value["attempt"], value["started_at"], value["ended_at"], base,
            summary)))
    conn.execute("DROP TABLE attempts")
    conn.execute("ALTER TABLE attempts_new RENAME TO attempts")
    conn.execute(schema.INDEX)
    conn.execute(schema.VIEW)


def _migrate_3_to_4(conn: sqlite3.Connection) -> None:
    """Version 4: which `dlbs run` recorded each attempt (`run_tag`, `run_host`, `run_folder`).

    Older attempts keep NULL there (no run recorded them under a tag); nothing is rewritten.
    """
    for name in schema.RUN_NAMES:
        conn.execute(f"ALTER TABLE attempts ADD COLUMN {name} TEXT")
    conn.execute(schema.TAG_INDEX)


# version N -> function that upgrades a database from N to N + 1 inside a transaction.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _migrate_1_to_2,
    2: _migrate_2_to_3,
    3: _migrate_3_to_4,
}
