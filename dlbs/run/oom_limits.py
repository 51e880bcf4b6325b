"""Out-of-memory limits: the smallest replica batch that ran out of memory, per kind.

The run policy (policy.py) skips an experiment whose replica batch (in tokens for a
transformer: `policy.replica_size`) is at least the limit of its kind (framework, device
type, model with `exp.oom_class`, dtype, phase: `policy.oom_key`), unless
`exp.ignore_past_errors`; the loop records a limit when an attempt runs out of memory. The
limits live in the results store beside the attempts (table `oom_limits`, schema.py), so
they outlast the run and every run on the store learns them; these statements are the
table's only readers and writers (`ResultsStore.execute`/`query`, `?` placeholders).
"""

from __future__ import annotations

from typing import Any

from dlbs.results.attempt import utc_now
from dlbs.results.store import ResultsStore

Key = tuple[str, str, str, str, str]
_NAMES = ("framework", "device_type", "model", "dtype", "phase", "replica_batch", "exp_id",
          "recorded_at")
_WHERE = "framework = ? AND device_type = ? AND model = ? AND dtype = ? AND phase = ?"


def record_oom(store: ResultsStore, key: Key, replica_batch: int,
               exp_id: str | None = None) -> None:
    """Remember that `replica_batch` ran out of memory; the smallest such batch is kept."""
    store.execute(
        "record an out-of-memory failure",
        "INSERT INTO oom_limits (framework, device_type, model, dtype, phase, "
        "replica_batch, exp_id, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (framework, device_type, model, dtype, phase) DO UPDATE SET "
        "replica_batch = excluded.replica_batch, exp_id = excluded.exp_id, "
        "recorded_at = excluded.recorded_at "
        "WHERE excluded.replica_batch < oom_limits.replica_batch",
        (*key, int(replica_batch), exp_id, utc_now()))


def oom_limit(store: ResultsStore, key: Key) -> int | None:
    """Smallest replica batch known to run out of memory for this kind, or None."""
    rows = store.query("read out-of-memory limits",
                       f"SELECT replica_batch FROM oom_limits WHERE {_WHERE}", key)
    return None if not rows else int(rows[0][0])


def oom_limits(store: ResultsStore) -> list[dict[str, Any]]:
    """Every remembered limit (for debugging and tests)."""
    rows = store.query("read out-of-memory limits",
                       f"SELECT {', '.join(_NAMES)} FROM oom_limits "
                       "ORDER BY framework, model, dtype, phase")
    return [dict(zip(_NAMES, row)) for row in rows]
