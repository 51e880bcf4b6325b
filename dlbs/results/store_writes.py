"""Writing attempts: the start, the end, a whole attempt, many at once, a job id.

One row per attempt. `record_start` writes the row before the backend runs, `record_end`
completes it; a row that was started but never ended is an attempt cut off by a crash of
`dlbs` (or a SLURM job still to re-attach, when it has a job id). Each write is one
transaction (store_base.py), so a `kill -9` at any moment leaves every committed attempt
intact and nothing half-written.

When an attempt ends, its summary is computed once (summary.py: the statistics engine's
batch-time statistics, the monitor's summaries, the scalar results) and kept beside the raw
results, with the per-batch times packed as a BLOB, and its view as codes (view_codes.py):
reports read these columns and never parse the raw results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from dlbs.errors import ResultsError
from dlbs.results.attempt import Attempt, check_status, json_text, loads, timestamp
from dlbs.results.schema import RUN_NAMES, SUMMARY_NAMES, VIEW_NAMES, report_row, summary_row
from dlbs.results.sql_session import Session
from dlbs.results.store_base import SqlStore
from dlbs.results.view_codes import view_of

_INSERTED = ("exp_id", "attempt", "status", "status_msg", "params", "results", "log_path",
             "environment", "job_id", "started_at", "ended_at", *RUN_NAMES, *SUMMARY_NAMES,
             *VIEW_NAMES)
INSERT = (f"INSERT INTO attempts ({', '.join(_INSERTED)}) "
          f"VALUES ({', '.join('?' * len(_INSERTED))})")
_END_ASSIGNMENTS = ", ".join(f"{name} = ?" for name in (*SUMMARY_NAMES, *VIEW_NAMES))
# Rows of an import written per statement batch (psycopg sends a batch in one round trip).
_BATCH = 500


class StoreWrites(SqlStore):
    """The writes of a results store (see the module)."""

    def next_attempt(self, exp_id: str) -> int:
        """The number the next attempt of `exp_id` gets (1 for a new experiment)."""
        with self._errors("read attempts"):
            return self._next_attempt(self._session, exp_id)

    @staticmethod
    def _next_attempt(session: Session, exp_id: str) -> int:
        row = session.one("SELECT MAX(attempt) FROM attempts WHERE exp_id = ?", (exp_id,))
        return 1 if row[0] is None else int(row[0]) + 1

    def record_start(
        self,
        exp_id: str,
        attempt: int | None,
        params: Mapping[str, Any],
        *,
        log_path: str | None = None,
        environment: Mapping[str, Any] | None = None,
        job_id: str | None = None,
        started_at: datetime | str | None = None,
        run: tuple[str | None, str | None, str | None] = (None, None, None),
    ) -> int:
        """Record that an attempt begins, before its backend (or job) starts; its number.

        `attempt` None takes the next number in the same transaction, so that two runs
        starting one experiment at once on a shared store never take the same number.
        `run` is (run_tag, run_host, run_folder) of the recording `dlbs run`.
        """
        with self._write(f"record the start of {exp_id} attempt {attempt or 'next'}") as session:
            number = self._next_attempt(session, exp_id) if attempt is None else attempt
            self._insert(session, exp_id, number, params, None, None, None, log_path,
                         environment, job_id, timestamp(started_at), None, run)
        return number

    def record_end(
        self,
        exp_id: str,
        attempt: int,
        status: str,
        *,
        status_msg: str | None = None,
        results: Mapping[str, Any] | None = None,
        ended_at: datetime | str | None = None,
        environment: Mapping[str, Any] | None = None,
    ) -> None:
        """Complete a started attempt with its status, reason and results.

        `environment`, when given, replaces the one recorded at the start: a SLURM job
        learns where it ran only from its nodes.
        """
        check_status(status)
        results = dict(results or {})
        with self._write(f"record the end of {exp_id} attempt {attempt}") as session:
            row = session.one(
                "SELECT params, started_at, environment FROM attempts "
                "WHERE exp_id = ? AND attempt = ? AND ended_at IS NULL", (exp_id, attempt))
            if row is None:
                raise ResultsError(
                    f"results database {self.location}: experiment {exp_id} has no open "
                    f"attempt {attempt} to end"
                )
            params, started_at = loads(row[0]), row[1]
            if environment is None:
                environment = loads(row[2])
            else:
                session.execute("UPDATE attempts SET environment = ? WHERE exp_id = ? AND "
                                "attempt = ?", (json_text(dict(environment)), exp_id, attempt))
            ended = timestamp(ended_at)
            session.execute(
                "UPDATE attempts SET status = ?, status_msg = ?, results = ?, ended_at = ?, "
                f"{_END_ASSIGNMENTS} WHERE exp_id = ? AND attempt = ?",
                (status, status_msg, json_text(results), ended,
                 *self._derived(session, exp_id, attempt, params, status, results,
                                environment, started_at, ended), exp_id, attempt))

    def record_attempt(
        self,
        exp_id: str,
        attempt: int | None,
        params: Mapping[str, Any],
        status: str,
        *,
        status_msg: str | None = None,
        results: Mapping[str, Any] | None = None,
        log_path: str | None = None,
        environment: Mapping[str, Any] | None = None,
        at: datetime | str | None = None,
        run: tuple[str | None, str | None, str | None] = (None, None, None),
    ) -> int:
        """Record a whole attempt at once (one that never ran: skipped, cancelled early).

        `attempt` None takes the next number, as in `record_start`; returns the number.
        """
        check_status(status)
        when = timestamp(at)
        with self._write(f"record {exp_id} attempt {attempt or 'next'}") as session:
            number = self._next_attempt(session, exp_id) if attempt is None else attempt
            self._insert(session, exp_id, number, params, status, status_msg, results,
                         log_path, environment, None, when, when, run)
        return number

    def record_attempts(self, attempts: Iterable[Attempt]) -> int:
        """Record many ended attempts in one transaction (importing results); returns the count.

        Each attempt's summary is computed as `record_end` computes it; all are written or,
        on any error, none.
        """
        count = 0
        seen: set[tuple[str, int]] = set()
        with self._write("record attempts") as session:
            batch: list[tuple[Any, ...]] = []
            for item in attempts:
                if item.status is None:
                    raise ResultsError(f"attempt {item.attempt} of {item.exp_id} has no status")
                check_status(item.status)
                if (item.exp_id, item.attempt) in seen:
                    raise ResultsError(f"results database {self.location}: experiment "
                                       f"{item.exp_id} already has attempt {item.attempt}")
                seen.add((item.exp_id, item.attempt))
                started = timestamp(item.started_at)
                batch.append(self._row(
                    session, item.exp_id, item.attempt, item.params, item.status,
                    item.status_msg, item.results, item.log_path, item.environment,
                    item.job_id, started, timestamp(item.ended_at or started),
                    (item.run_tag, item.run_host, item.run_folder)))
                count += 1
                if len(batch) >= _BATCH:
                    self._insert_rows(session, batch)
                    batch = []
            self._insert_rows(session, batch)
        return count

    def set_job_id(self, exp_id: str, attempt: int, job_id: str) -> None:
        """Remember the scheduler's job id of an open attempt, to re-attach to it later."""
        with self._write(f"set the job id of {exp_id} attempt {attempt}") as session:
            cursor = session.execute(
                "UPDATE attempts SET job_id = ? "
                "WHERE exp_id = ? AND attempt = ? AND ended_at IS NULL",
                (str(job_id), exp_id, attempt))
            if cursor.rowcount != 1:
                raise ResultsError(
                    f"results database {self.location}: experiment {exp_id} has no open "
                    f"attempt {attempt}"
                )

    # -- rows -------------------------------------------------------------------------------

    def _insert(self, session: Session, exp_id: str, attempt: int, params: Mapping[str, Any],
                status: str | None, status_msg: str | None,
                results: Mapping[str, Any] | None, log_path: str | None,
                environment: Mapping[str, Any] | None, job_id: str | None, started_at: str,
                ended_at: str | None, run: tuple[str | None, str | None, str | None]) -> None:
        self._insert_rows(session, [self._row(
            session, exp_id, attempt, params, status, status_msg, results, log_path,
            environment, job_id, started_at, ended_at, run)])

    def _insert_rows(self, session: Session, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        try:
            if len(rows) == 1:
                session.execute(INSERT, rows[0])
            else:
                session.executemany(INSERT, rows)
        except self.integrity_errors as error:
            which = f"experiment {rows[0][0]} already has attempt {rows[0][1]}" \
                if len(rows) == 1 else (f"one of the attempts of experiments {rows[0][0]} to "
                                        f"{rows[-1][0]} is already there")
            raise ResultsError(f"results database {self.location}: {which}",
                               hint="take the number from next_attempt()") from error

    def _row(self, session: Session, exp_id: str, attempt: int, params: Mapping[str, Any],
             status: str | None, status_msg: str | None, results: Mapping[str, Any] | None,
             log_path: str | None, environment: Mapping[str, Any] | None, job_id: str | None,
             started_at: str, ended_at: str | None,
             run: tuple[str | None, str | None, str | None]) -> tuple[Any, ...]:
        """The values of INSERT's columns for one attempt."""
        return (exp_id, attempt, status, status_msg, json_text(dict(params)),
                None if results is None else json_text(dict(results)), log_path,
                json_text(dict(environment or {})), job_id, started_at, ended_at, *run,
                *self._derived(session, exp_id, attempt, params, status,
                               None if results is None else dict(results), environment,
                               started_at, ended_at))

    def _derived(self, session: Session, exp_id: str, attempt: int,
                 params: Mapping[str, Any], status: str | None,
                 results: Mapping[str, Any] | None, environment: Mapping[str, Any] | None,
                 started_at: str, ended_at: str | None) -> tuple[Any, ...]:
        """Values of the SUMMARY_NAMES and VIEW_NAMES columns, computed from the raw ones."""
        summary, summary_values = summary_row(params, results, started_at)
        base, codes = self._coder.columns(session, view_of(params, summary, environment,
                                                           exp_id))
        return (*summary_values, base, codes,
                report_row(status, attempt, started_at, ended_at, base, summary))
