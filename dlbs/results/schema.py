"""The layout of a results database, its version, and the migrations from older versions.

Version 1: `attempts` (one row per attempt), the `experiments` view, `oom_limits`.
Version 2 adds to each attempt its summary (summary.py: the statistics engine's values, the
monitor's summaries, the scalar results) as JSON and as columns, the per-batch times packed
as a BLOB, and its parameters as a reference to a shared base plus its differences
(params_delta.py); table `param_bases` holds the bases. docs/results.md documents it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

from dlbs.results import stats
from dlbs.results.params_delta import BaseChooser
from dlbs.results.summary import summarize
from dlbs.util import exact_json

SCHEMA_VERSION = 2
# PRAGMA application_id: 'dlbs' in ASCII, so `file` and we can tell our databases apart.
APPLICATION_ID = 0x646C6273

# Columns version 2 added to `attempts`: the summary (SUMMARY_NAMES, in summary_row's
# order) and the parameters as a base and differences.
SUMMARY_NAMES = ["summary", "time_data", "time_count", "time_mean", "time_std",
                 "time_median", "time_p90", "time_p95", "time_p99", "time_min", "time_max",
                 "throughput", "stats_warnings"]
ADDED_NAMES = [*SUMMARY_NAMES, "param_base", "param_delta"]
# Which summary key fills each number column (the whole summary is the JSON column).
SUMMARY_COLUMN_KEYS = {
    "time_count": "results.time_count", "time_mean": "results.time",
    "time_std": "results.time_std", "time_median": "results.time_median",
    "time_p90": "results.time_p90", "time_p95": "results.time_p95",
    "time_p99": "results.time_p99", "time_min": "results.time_min",
    "time_max": "results.time_max", "throughput": "results.throughput",
}
# Version 1's columns, which a migration copies.
V1_NAMES = ["exp_id", "attempt", "status", "status_msg", "params", "results", "log_path",
            "environment", "job_id", "started_at", "ended_at"]
# Small columns first, what reports read next (summary, parameter differences, per-batch
# times), the raw parameters and results last: SQLite keeps the start of a row on its page
# and the rest in overflow pages, read only up to the last column a query asks for, so
# reports and comparisons of 100,000 attempts never read the raw results.
_ATTEMPTS = """CREATE TABLE {name} (
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
_INDEX = "CREATE INDEX attempts_open ON attempts (ended_at) WHERE ended_at IS NULL"
_VIEW = """CREATE VIEW experiments AS
    SELECT a.* FROM attempts AS a
    WHERE a.attempt = (SELECT MAX(b.attempt) FROM attempts AS b WHERE b.exp_id = a.exp_id)"""
_BASES = """CREATE TABLE param_bases (
    id          INTEGER PRIMARY KEY,
    params      TEXT    NOT NULL
)"""
# Changing the layout means SCHEMA_VERSION + 1 and a MIGRATIONS entry (the status list is
# spelled out, not taken from STATUSES, for that reason).
SCHEMA = f"""
{_ATTEMPTS.format(name="attempts")};
{_INDEX};
{_VIEW};
{_BASES};
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
"""


def dumps(value: Any) -> str:
    """JSON as the store writes it: keys sorted; a value of an odd type kept as its text."""
    return exact_json.dumps(value, sort_keys=True)


def summary_row(params: Mapping[str, Any], results: Mapping[str, Any] | None,
                started_at: str | None) -> tuple[Any, ...]:
    """Values of the summary columns (SUMMARY_NAMES' order) of one attempt's results."""
    if results is None:
        return (None,) * len(SUMMARY_NAMES)
    summary = summarize(params, results, started_at)
    samples = stats.finite_samples(results.get(stats.SAMPLES_KEY))
    numbers = tuple(_number(summary.get(key)) for key in SUMMARY_COLUMN_KEYS.values())
    warnings = summary.get(stats.WARNINGS_KEY)
    return (dumps(summary), stats.pack_samples(samples), *numbers,
            dumps(warnings) if warnings else None)


def param_columns(conn: sqlite3.Connection, chooser: BaseChooser,
                  params: Mapping[str, Any]) -> tuple[int, str]:
    """(param_base, param_delta) of `params`: a remembered base, or a new one stored now."""
    chosen = chooser.choose(params)
    if chosen is None:
        cursor = conn.execute("INSERT INTO param_bases (params) VALUES (?)",
                              (exact_json.dumps(dict(params)),))
        base_id = int(cursor.lastrowid or 0)
        chooser.remember(base_id, params)
        return base_id, "[{}, []]"
    base_id, changed, removed = chosen
    return base_id, exact_json.dumps([changed, removed])


def _number(value: Any) -> Any:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Version 2: the summary and parameter columns.

    The table is rebuilt in version 2's column order (small columns first); every attempt's
    summary and parameter base are computed now.
    """
    columns = ", ".join(V1_NAMES)
    conn.execute("DROP VIEW experiments")
    conn.execute(_ATTEMPTS.format(name="attempts_v2"))
    conn.execute(f"INSERT INTO attempts_v2 ({columns}) SELECT {columns} FROM attempts "
                 "ORDER BY rowid")
    conn.execute("DROP TABLE attempts")
    conn.execute("ALTER TABLE attempts_v2 RENAME TO attempts")
    conn.execute(_INDEX)
    conn.execute(_VIEW)
    conn.execute(_BASES)
    chooser = BaseChooser()
    assignments = ", ".join(f"{name} = ?" for name in ADDED_NAMES)
    rows = conn.execute("SELECT rowid, params, results, started_at FROM attempts "
                        "ORDER BY rowid").fetchall()
    for rowid, params_text, results_text, started_at in rows:
        params = exact_json.loads(params_text)
        results = None if results_text is None else exact_json.loads(results_text)
        conn.execute(f"UPDATE attempts SET {assignments} WHERE rowid = ?",
                     (*summary_row(params, results, started_at),
                      *param_columns(conn, chooser, params), rowid))


# version N -> function that upgrades a database from N to N + 1 inside a transaction.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _migrate_1_to_2}
