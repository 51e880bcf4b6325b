"""The sweep's books: every attempt recorded in its results store as it starts and ends.

An attempt is recorded started (with its mark, `dlbs.run.marks`) before anything of it runs,
and ended with its verdict (`dlbs.run.judge`) once its target says how it ended: a crash of
dlbs itself then loses nothing and repeats nothing that ended. The summary and the reporter
hear of each end here too. Only the run loop's thread uses a `Recorder`: SQLite connections
stay in the thread that opened them.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dlbs.recipes import Invocation
from dlbs.results.attempt import utc_now
from dlbs.results.protocol import parse_log, refused_note
from dlbs.results.store import ResultsStore, open_existing_store, open_store
from dlbs.run import marks, oom_limits, policy
from dlbs.run.environment import collect_environment
from dlbs.run.interrupts import STOPPED_STATUS
from dlbs.run.job_results import (
    absorb_node_files,
    job_environment,
    job_usage,
    split_node_values,
)
from dlbs.run.judge import Verdict, judge
from dlbs.run.logs import append_verdict, create_log, write_header
from dlbs.run.outcome import Outcome
from dlbs.run.targets import ProcessTarget, SchedulerTarget, Target

Experiment = dict[str, Any]
FAILED = policy.FAILED
#: The summary's count of experiments not run again because an earlier run recorded them failed.
FAILED_EARLIER = "failed earlier"


class Reporter(Protocol):
    """What the CLI shows while the sweep runs."""

    def planned(self, total: int) -> None: ...
    def started(self, experiment: Experiment, log_path: str) -> None: ...
    def finished(self, experiment: Experiment, status: str, message: str | None,
                 log_path: str | None, seconds: float) -> None: ...
    def note(self, text: str) -> None: ...
    def progress(self, experiment: Experiment, text: str) -> None: ...


@dataclass
class Summary:
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[Experiment, str, str | None, str | None]] = field(default_factory=list)
    interrupted: bool = False
    #: What stopped the sweep (SIGINT, SIGTERM, SIGHUP), and the exit status that says so.
    stopped_by: str | None = None
    stop_status: int = STOPPED_STATUS

    def add(self, status: str) -> None:
        self.counts[status] = self.counts.get(status, 0) + 1

    @property
    def exit_status(self) -> int:
        if self.interrupted:
            return self.stop_status
        return 1 if any(self.counts.get(s) for s in (*FAILED, FAILED_EARLIER)) else 0


@dataclass
class Job:
    """An experiment to run, with its invocation and the target that runs it."""

    experiment: Experiment
    target: Target
    invocation: Invocation


@dataclass
class Attempt:
    """One attempt that was started: what the loop needs to finish it."""

    job: Job
    store: ResultsStore
    number: int
    log_path: str
    begin: float
    #: When the attempt started, seconds since the epoch (the monitors' clocks count from it).
    started_epoch: float = 0.0
    #: What a later run needs to stop it if dlbs dies (local and container attempts).
    mark: dict[str, Any] | None = None
    #: When the store recorded its start (its `started_at`), for the log's verdict.
    started_at: str | None = None

    @property
    def exp_id(self) -> str:
        return str(self.job.experiment["exp.id"])


def store_path(experiment: Mapping[str, Any]) -> str:
    """The results store an experiment is recorded in: a path, or a database URL."""
    return str(experiment.get("runtime.results_db") or
               os.path.join(log_dir(experiment), "results.db"))


def run_tag(experiment: Mapping[str, Any]) -> str | None:
    """The experiment's runtime.run_tag; None when it has none (see Sweep)."""
    tag = experiment.get("runtime.run_tag")
    return str(tag) if tag not in (None, "") else None


def run_fields(experiment: Mapping[str, Any]) -> tuple[str | None, str, str]:
    """(run_tag, run_host, run_folder) that the store records with each attempt."""
    return (run_tag(experiment), socket.gethostname(),
            os.path.abspath(log_dir(experiment)))


def log_dir(experiment: Mapping[str, Any]) -> str:
    """The folder of an experiment's logs."""
    return str(experiment.get("exp.log_dir") or
               os.path.dirname(str(experiment.get("exp.log_file") or "")) or ".")


@dataclass
class Recorder:
    """The results stores of a sweep, its summary and reporter; see the module doc."""

    reporter: Reporter
    summary: Summary = field(default_factory=Summary)
    _stores: dict[str, ResultsStore] = field(default_factory=dict)
    _environment: dict[str, Any] | None = None
    #: Keys of benchmarks' output already warned about (refused_output).
    _refused_keys: set[str] = field(default_factory=set)
    #: A store's URL by the name the experiments give it (its URL without a password).
    locations: dict[str, str] = field(default_factory=dict)

    # -- the stores ----------------------------------------------------------------------
    def store(self, experiment: Mapping[str, Any]) -> ResultsStore:
        """The experiment's results store, opened (created) once."""
        path = store_path(experiment)
        if path not in self._stores:
            # Created when missing (an SQLite file's folder too), or says why not.
            self._stores[path] = open_store(self.locations.get(path, path))
        return self._stores[path]

    def all_stores(self, experiments: Sequence[Mapping[str, Any]]
                   ) -> list[tuple[str, ResultsStore]]:
        """Every results database of the plan, opened (created) once each."""
        for experiment in experiments:
            self.store(experiment)
        return list(self._stores.items())

    def existing_stores(self, experiments: Sequence[Mapping[str, Any]]
                        ) -> Iterator[tuple[str, ResultsStore | None]]:
        """Each distinct results store of the plan, opened when it exists (none is made)."""
        for path in dict.fromkeys(store_path(e) for e in experiments):
            yield path, open_existing_store(self.locations.get(path, path))

    def oom_limit(self, experiment: Mapping[str, Any]) -> int | None:
        """The smallest replica batch of the experiment's kind known to run out of memory."""
        return oom_limits.oom_limit(self.store(experiment), policy.oom_key(experiment))

    def environment(self) -> dict[str, Any]:
        """The environment of the machine that runs dlbs, collected once per sweep."""
        if self._environment is None:
            self._environment = collect_environment()
        return self._environment

    def close(self) -> None:
        for store in self._stores.values():
            store.close()

    # -- starting ------------------------------------------------------------------------
    def begin(self, job: Job) -> Attempt | None:
        """Open an attempt (log header, store row); None when it is skipped instead."""
        experiment = job.experiment
        store = self.store(experiment)
        exp_id = experiment["exp.id"]
        # A failure earlier in this sweep may have taught a new out-of-memory limit.
        decision = policy.decide(experiment, None, self.oom_limit(experiment))
        if decision.action == policy.SKIP:
            self.skipped(experiment, decision.reason)
            return None
        number = store.next_attempt(exp_id)
        log_path: str | None = None
        try:
            log_path, log = create_log(str(experiment["exp.log_file"]), number)
            with log:
                write_header(log, experiment, number)
        except OSError as error:
            self._unstarted(job, store, number, log_path, error)
            return None
        # Recorded before it starts: whatever it starts carries the mark's token.
        mark = marks.new_mark(job.target.name) if isinstance(job.target, ProcessTarget) \
            else None
        # The number is taken in the write itself: on a shared store another run may have
        # started this experiment meanwhile (the log keeps the number it was made with).
        started_at = utc_now()
        # The store keeps where the log is from anywhere (a reader may run in another folder).
        number = store.record_start(exp_id, None, experiment, log_path=os.path.abspath(log_path),
                                    environment=self.environment(),
                                    job_id=marks.encode(mark) if mark else None,
                                    started_at=started_at, run=run_fields(experiment))
        self.reporter.started(experiment, log_path)
        return Attempt(job, store, number, log_path, time.monotonic(), time.time(), mark,
                       started_at)

    def _unstarted(self, job: Job, store: ResultsStore, number: int, log_path: str | None,
                   error: OSError) -> None:
        """An attempt whose log could not be created or written: a failure, with the reason."""
        experiment = job.experiment
        where = log_path or str(experiment["exp.log_file"])
        reason = f"could not start: cannot write its log {where}: {error.strerror or error}"
        store.record_attempt(experiment["exp.id"], None, experiment, "failure",
                             status_msg=reason,
                             log_path=os.path.abspath(log_path) if log_path else None,
                             environment=self.environment(), run=run_fields(experiment))
        self.summary.add("failure")
        self.summary.failures.append((experiment, "failure", reason, log_path))
        self.reporter.finished(experiment, "failure", reason, log_path, 0.0)

    def skipped(self, experiment: Experiment, reason: str) -> None:
        """An experiment the policy skips when its turn comes: one attempt, skipped."""
        self._not_run(experiment, "skipped", reason)

    def not_started(self, experiment: Experiment, reason: str) -> None:
        """An experiment that cannot start here (policy.FAIL): one attempt, a failure."""
        self._not_run(experiment, "failure", reason)

    def _not_run(self, experiment: Experiment, status: str, reason: str) -> None:
        self.store(experiment).record_attempt(
            experiment["exp.id"], None, experiment, status, status_msg=reason,
            environment=self.environment(), run=run_fields(experiment))
        self.summary.add(status)
        if status in FAILED:
            self.summary.failures.append((experiment, status, reason, None))
        self.reporter.finished(experiment, status, reason, None, 0.0)

    def mark(self, attempt: Attempt, mark: dict[str, Any]) -> None:
        """A started benchmark's process tree root joins its attempt's mark."""
        attempt.mark = mark
        attempt.store.set_job_id(attempt.exp_id, attempt.number, marks.encode(mark))

    def job_id(self, attempt: Attempt, job_id: str) -> None:
        """The scheduler's job id of an attempt (or its pending submission's name)."""
        attempt.store.set_job_id(attempt.exp_id, attempt.number, job_id)

    # -- ending --------------------------------------------------------------------------
    def finish(self, attempt: Attempt, outcome: Outcome, usage: Mapping[str, Any] | None = None,
               warnings: Sequence[str] = ()) -> Verdict:
        """Judge an attempt that ended and record it; the verdict."""
        experiment = attempt.job.experiment
        environment = None
        if isinstance(attempt.job.target, SchedulerTarget):
            absorb_node_files(attempt.log_path)
        verdict, nodes_environment, nodes_usage = self._verdict(outcome, attempt)
        verdict.results.update({f"results.use.{name}": values
                                for name, values in (usage or {}).items() if values})
        if warnings:
            verdict.results["results.use.warnings"] = list(warnings)
        verdict.results.update(nodes_usage)
        if nodes_environment is not None:
            environment = nodes_environment
        self.end(attempt.store, attempt.exp_id, attempt.number, attempt.log_path,
                 attempt.started_at, verdict.status, verdict.message, verdict.results,
                 environment)
        size = policy.replica_size(experiment)
        if verdict.out_of_memory and size is not None:
            oom_limits.record_oom(attempt.store, policy.oom_key(experiment), size,
                                  exp_id=attempt.exp_id)
        self.summary.add(verdict.status)
        if verdict.status != "ok":
            self.summary.failures.append((experiment, verdict.status, verdict.message,
                                          attempt.log_path))
        self.reporter.finished(experiment, verdict.status, verdict.message, attempt.log_path,
                               time.monotonic() - attempt.begin)
        if verdict.status == "interrupted":
            self.summary.interrupted = True
        return verdict

    def end(self, store: ResultsStore, exp_id: str, number: int, log_path: str | None,
            started_at: str | None, status: str, message: str | None,
            results: Mapping[str, Any] | None = None,
            environment: Mapping[str, Any] | None = None) -> None:
        """Record an attempt's end: the verdict in its log first, then in its store.

        The log's verdict (logs.append_verdict) keeps the outcome with the log, for `dlbs
        parse` and `results copy` of the folder (a timeout, a signal): written first, so that
        a store that fails now still leaves it; a verdict that the store then lacks is
        replaced by the next run's ("interrupted", appended after it: the last one counts).
        """
        ended_at = utc_now()
        if log_path:
            append_verdict(log_path, {"attempt": number, "status": status, "message": message,
                                      "started_at": started_at, "ended_at": ended_at})
        store.record_end(exp_id, number, status, status_msg=message, results=results,
                         ended_at=ended_at, environment=environment)

    def refused_output(self, experiment: Mapping[str, Any], keys: Sequence[str]) -> None:
        """Warn, once per key in a sweep, of keys a benchmark printed that were not taken."""
        new = [key for key in keys if key not in self._refused_keys]
        if not new:
            return
        self._refused_keys.update(new)
        self.reporter.note(f"warning: experiment {experiment.get('exp.id')}: {refused_note(new)}")

    def finish_skipped(self, attempt: Attempt, reason: str) -> None:
        """An attempt whose queued job was cancelled by the policy: recorded as skipped."""
        self.end(attempt.store, attempt.exp_id, attempt.number, attempt.log_path,
                 attempt.started_at, "skipped", reason)
        self.summary.add("skipped")
        self.reporter.finished(attempt.job.experiment, "skipped", reason, attempt.log_path,
                               time.monotonic() - attempt.begin)

    def _verdict(self, outcome: Outcome, attempt: Attempt
                 ) -> tuple[Verdict, dict[str, Any] | None, dict[str, Any]]:
        """The verdict, and what the nodes of a scheduler's job said (environment, usage)."""
        try:
            printed = parse_log(attempt.log_path).printed   # what ran printed, not the header
        except Exception as error:  # noqa: BLE001 - a log we cannot read is the attempt's
            printed = {}
            outcome = Outcome("failure", f"cannot read the log: {error}")
        printed, environments, monitors = split_node_values(printed)
        verdict = judge(outcome, printed, attempt.job.experiment, os.getcwd())
        self.refused_output(attempt.job.experiment, verdict.refused)
        if verdict.status == "failure" and "results.status_msg" not in printed:
            last = _last_output_line(attempt.log_path)
            if last:
                verdict.message = f"{verdict.message}; last output: {last}"
        return (verdict, job_environment(environments, self.environment()),
                job_usage(monitors, attempt.started_epoch))


def _last_output_line(log_path: str, tail: int = 4096) -> str | None:
    """The backend's last words (an exception, usually) when it printed no reason itself."""
    try:
        with open(log_path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - tail))
            lines = log.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        text = line.strip()
        if text and not text.startswith("__") and not text.startswith("dlbs:"):
            return text[:300]
    return None
