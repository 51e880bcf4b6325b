"""The layout of a results database and its version; what each attempt row holds.

Version 1: `attempts` (one row per attempt), the `experiments` view, `oom_limits`.
Version 2 added to each attempt its summary (summary.py: the statistics engine's values, the
monitor's summaries, the scalar results) as JSON and as columns, and the per-batch times
packed as a BLOB. Version 3 keeps what reports read in two small BLOBs at the front of the
row: `report_row` (the numbers: status, attempt, when, the summary's batch-time statistics)
and `param_codes` (the attempt's view as integer codes: view_codes.py, tables `param_keys`,
`param_values`, `param_bases`). Version 4 says which `dlbs run` recorded each attempt
(`run_tag`, `run_host`, `run_folder`), for history and for resuming per tag. docs/results.md
documents it; migrations.py upgrades older SQLite databases; postgres_schema.py is the same
layout in PostgreSQL's types.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from dlbs.results import stats
from dlbs.results.summary import summarize
from dlbs.util import exact_json

SCHEMA_VERSION = 4
# PRAGMA application_id: 'dlbs' in ASCII, so `file` and we can tell our databases apart.
APPLICATION_ID = 0x646C6273

# The summary's columns (summary_row's order): the whole summary as JSON, the per-batch
# times, the statistics as numbers, the warnings.
SUMMARY_NAMES = ["summary", "time_data", "time_count", "time_mean", "time_std",
                 "time_median", "time_p90", "time_p95", "time_p99", "time_min", "time_max",
                 "throughput", "stats_warnings"]
# Which summary key fills each number column (the whole summary is the JSON column).
SUMMARY_COLUMN_KEYS = {
    "time_count": "results.time_count", "time_mean": "results.time",
    "time_std": "results.time_std", "time_median": "results.time_median",
    "time_p90": "results.time_p90", "time_p95": "results.time_p95",
    "time_p99": "results.time_p99", "time_min": "results.time_min",
    "time_max": "results.time_max", "throughput": "results.throughput",
}
# Columns that describe how reports read an attempt, written with its view.
VIEW_NAMES = ["param_base", "param_codes", "report_row"]
# Which `dlbs run` recorded an attempt (version 4), written with its first row.
RUN_NAMES = ["run_tag", "run_host", "run_folder"]

# `report_row`: little-endian float64 values, NaN where there is none. Status: the index in
# STATUS_CODES, -1 for an attempt that has not ended; recency: when it ended (else started),
# seconds since the epoch; flags: FLAG_* bits. The summary keys are SUMMARY_COLUMN_KEYS'
# (finite numbers only).
STATUS_CODES = ("ok", "failure", "skipped", "interrupted", "timeout", "cancelled")
REPORT_FIELDS = ("status", "attempt", "recency", "param_base", "flags",
                 *SUMMARY_COLUMN_KEYS.values())
FLAG_WARNINGS = 1        # results.stats_warnings is set
FLAG_ODD_SUMMARY = 2     # a key of REPORT_FIELDS holds something else than a finite number
_REPORT_ROW = struct.Struct(f"<{len(REPORT_FIELDS)}d")

# What reports read (report_row, param_codes) first, then the small columns, the raw
# parameters and results last: SQLite keeps the start of a row (at least 489 bytes of it) on
# its page and the rest in overflow pages, read only up to the last column a query asks for.
# The run's columns (version 4) come after them, where the migration adds them (resuming
# reads them from the index TAG_INDEX).
ATTEMPTS = """CREATE TABLE {name} (
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
    run_tag     TEXT,
    run_host    TEXT,
    run_folder  TEXT,
    PRIMARY KEY (exp_id, attempt),
    CHECK ((status IS NULL) = (ended_at IS NULL))
)"""
INDEX = "CREATE INDEX attempts_open ON attempts (ended_at) WHERE ended_at IS NULL"
# Resuming per tag reads the attempts of one tag and host (version 4).
TAG_INDEX = "CREATE INDEX attempts_tag ON attempts (run_tag, run_host, exp_id, attempt)"
VIEW = """CREATE VIEW experiments AS
    SELECT a.* FROM attempts AS a
    WHERE a.attempt = (SELECT MAX(b.attempt) FROM attempts AS b WHERE b.exp_id = a.exp_id)"""
VIEW_TABLES = """CREATE TABLE param_keys (
    id          INTEGER PRIMARY KEY,
    key         TEXT    NOT NULL UNIQUE
);
CREATE TABLE param_values (
    key_id      INTEGER NOT NULL,
    number      INTEGER NOT NULL CHECK (number >= 2),
    value       TEXT    NOT NULL,
    PRIMARY KEY (key_id, number),
    UNIQUE (key_id, value)
) WITHOUT ROWID;
CREATE TABLE param_bases (
    id          INTEGER PRIMARY KEY,
    codes       BLOB    NOT NULL
)"""
# Changing the layout means SCHEMA_VERSION + 1 and a migration (migrations.py); the status
# list is spelled out, not taken from STATUSES, for that reason.
SCHEMA = f"""
{ATTEMPTS.format(name="attempts")};
{INDEX};
{TAG_INDEX};
{VIEW};
{VIEW_TABLES};
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
                started_at: str | None) -> tuple[dict[str, Any] | None, tuple[Any, ...]]:
    """The summary of one attempt's results, and the values of its SUMMARY_NAMES columns."""
    if results is None:
        return None, (None,) * len(SUMMARY_NAMES)
    summary = summarize(params, results, started_at)
    samples = stats.finite_samples(results.get(stats.SAMPLES_KEY))
    numbers = tuple(_number(summary.get(key)) for key in SUMMARY_COLUMN_KEYS.values())
    warnings = summary.get(stats.WARNINGS_KEY)
    return summary, (dumps(summary), stats.pack_samples(samples), *numbers,
                     dumps(warnings) if warnings else None)


def report_row(status: str | None, attempt: int, started_at: str, ended_at: str | None,
               param_base: int, summary: Mapping[str, Any] | None) -> bytes:
    """The `report_row` BLOB of an attempt (see REPORT_FIELDS)."""
    summary = summary or {}
    flags = FLAG_WARNINGS if summary.get(stats.WARNINGS_KEY) else 0
    numbers = []
    for key in SUMMARY_COLUMN_KEYS.values():
        value = summary.get(key)
        if _finite(value):
            numbers.append(float(value))
            continue
        numbers.append(math.nan)
        if value is not None and _number(value) is None:
            flags |= FLAG_ODD_SUMMARY   # text, a bool, a list: read from the JSON summary
    recency = epoch(ended_at or started_at)
    return _REPORT_ROW.pack(
        float(STATUS_CODES.index(status)) if status in STATUS_CODES else -1.0,
        float(attempt), math.nan if recency is None else recency, float(param_base),
        float(flags), *numbers)


def epoch(text: str | None) -> float | None:
    """An ISO-8601 time as seconds since the epoch (a time without zone is local time)."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        return None


def _finite(value: Any) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:   # an integer beyond a float's range
        return False


def _number(value: Any) -> Any:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None
