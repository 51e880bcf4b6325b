"""One attempt of one experiment as a results store keeps it, whatever the database.

`Attempt` is a whole row (what `dlbs parse`, resume and copying read); `StoredSummary` is an
attempt as reports read it, from its summary and without the raw results. Both read as a
flat experiment the way `dlbs parse` gives one from a log (`flatten`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import numpy as np

from dlbs.errors import ResultsError
from dlbs.results.protocol import STATUSES, outcome_values
from dlbs.results.schema import dumps
from dlbs.results.view_codes import ENV_PREFIX
from dlbs.util import exact_json

# What `latest_status` says about an attempt that began and never ended.
STARTED = "started"


def utc_now() -> str:
    """Current time as ISO-8601 UTC with milliseconds (sorts as text)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def timestamp(value: datetime | str | None) -> str:
    """A time as the store writes it: ISO-8601 UTC (now, when None); text is kept as it is."""
    if value is None:
        return utc_now()
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.astimezone()
        return value.astimezone(UTC).isoformat(timespec="milliseconds")
    return value


def loads(text: str | None) -> Any:
    """A JSON column's value ({} for NULL)."""
    return {} if text is None else exact_json.loads(text)


def json_text(value: Any) -> str:
    """A JSON column's text (keys sorted; a value of an odd type kept as its text)."""
    return dumps(value)


class NoStore(ResultsError):
    """There is no results database where one was to be read (and none was to be made)."""


def check_status(status: str) -> None:
    """Refuse a status the schema does not know."""
    if status not in STATUSES:
        raise ResultsError(
            f"unknown experiment status {status!r}; expected one of {', '.join(STATUSES)}"
        )


@dataclass(frozen=True)
class Attempt:
    """One attempt of one experiment as stored."""

    exp_id: str
    attempt: int
    status: str | None
    status_msg: str | None
    params: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    log_path: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    job_id: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    # What summary.py computed from `results` when the attempt ended ({} before that).
    summary: dict[str, Any] = field(default_factory=dict)
    # Which `dlbs run` recorded it (docs/results.md): its runtime.run_tag, its host and its
    # log folder; None for attempts recorded before schema version 4.
    run_tag: str | None = None
    run_host: str | None = None
    run_folder: str | None = None

    @property
    def ended(self) -> bool:
        """Whether the attempt was completed (with any status)."""
        return self.ended_at is not None

    def as_experiment(self) -> dict[str, Any]:
        """The attempt as a flat experiment dict, as `dlbs parse` gives one from a log.

        The stored status wins over a `results.status` the backend printed (the engine
        may have judged a timeout); an attempt that never ended reads as `started`. The
        summary's statistics win over the backend's values of the same keys; of the results,
        only results and the keys a backend owns are read (`protocol.outcome_values`), so a
        stored `exp.model` never replaces the planned one.
        """
        experiment = dict(self.params)
        experiment.update(outcome_values(self.results))
        return flatten(experiment, self.summary, self.exp_id, self.attempt, self.status,
                       self.status_msg, self.log_path, self.started_at, self.ended_at,
                       self.environment)


def flatten(experiment: dict[str, Any], summary: Mapping[str, Any], exp_id: str,
            attempt: int, status: str | None, status_msg: str | None, log_path: str | None,
            started_at: str | None, ended_at: str | None,
            environment: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`experiment` (parameters and results) completed as `Attempt.as_experiment` says.

    The one function that makes a stored attempt's flat experiment, for `dlbs parse`, the
    reports' records and `dlbs serve`: its parameters, its summary (the statistics, the
    monitor's summaries, the energy; only results, `protocol.outcome_values`, stand beside
    the parameters), its environment as `env.<name>` keys (what reports show of it), and
    the attempt's own columns.
    """
    experiment.update(outcome_values(summary))
    for name, value in (environment or {}).items():
        experiment[ENV_PREFIX + str(name)] = value
    experiment["exp.id"] = exp_id
    experiment["results.status"] = status or STARTED
    if status_msg is not None:
        experiment["results.status_msg"] = status_msg
    else:
        experiment.pop("results.status_msg", None)
    experiment["results.attempt"] = attempt
    if log_path is not None:
        experiment["results.log_file"] = log_path
    if started_at is not None:
        experiment.setdefault("results.start_time", started_at)
    if ended_at is not None:
        experiment.setdefault("results.end_time", ended_at)
    return experiment


class StoredSummary(NamedTuple):
    """One attempt as reports read it (see `ResultsStore.summaries`)."""

    experiment: dict[str, Any]       # as Attempt.as_experiment(), without number series
    environment: dict[str, Any]
    samples: np.ndarray | None       # per-batch times, when asked for and present
    started_at: str
    ended_at: str | None
    rowid: int = 0


@dataclass(frozen=True)
class ReportColumns:
    """Every attempt's `report_row` and `param_codes` (schema.py), in rowid order, as arrays.

    What the columnar reader (stored_columns.py) turns into a report's columns: the BLOBs
    of all attempts concatenated, and the size of each attempt's codes, so that no Python
    object is made per attempt.
    """

    #: The attempts' rowids, ascending (int64).
    rowids: np.ndarray
    #: Their `report_row` BLOBs, one after the other, and the bytes of each.
    rows: bytes
    row_sizes: np.ndarray
    #: Their `param_codes` BLOBs, one after the other, and the bytes of each.
    codes: bytes
    code_sizes: np.ndarray

    @classmethod
    def of_rows(cls, rows: list[tuple[int, Any, Any]]) -> ReportColumns:
        """From (rowid, report_row, param_codes) rows in rowid order (a NULL: no bytes)."""
        report_rows = [bytes(row[1] or b"") for row in rows]
        codes = [bytes(row[2] or b"") for row in rows]
        return cls(np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows)),
                   b"".join(report_rows),
                   np.fromiter(map(len, report_rows), dtype=np.intp, count=len(rows)),
                   b"".join(codes), np.fromiter(map(len, codes), dtype=np.intp, count=len(rows)))

    def __len__(self) -> int:
        return len(self.rowids)
