"""The run loop: every experiment of a plan, where its parameters say, with resume.

Order of work: take the run lock of each log folder and of each results database; finish
what an earlier `dlbs run` left (re-attach to SLURM jobs still queued or running, stop the
processes and containers that a run killed with `kill -9` left running, mark attempts that
were cut off as interrupted); decide what to run; check every target and every log's place
before anything starts (pre-flight), and warn of containers that get the host; then start
experiments in plan order as room allows, recording each attempt's start (with its mark,
`dlbs.run.marks`) before it runs and its end after, so that a crash of dlbs itself loses
nothing, repeats nothing that ended, and leaves nothing running for long:
- local and Docker experiments run in worker threads (`dlbs.run.pool`), `runtime.max_parallel`
  at once on disjoint GPUs (one at a time by default);
- SLURM experiments are submitted `slurm.max_in_flight` at a time (0: all), as job arrays
  where their requests agree, and followed together (`dlbs.run.flight`).
This thread alone touches the results stores. Ctrl-C, SIGTERM and SIGHUP all become one stop
request (`dlbs.run.interrupts`): running processes and containers are stopped, SLURM jobs
are cancelled or left to re-attach (`slurm.on_interrupt`), and the sweep ends with 128 + the
signal's number (130, 143, 129); a second signal stops without waiting for graceful ends.
A log that cannot be one (a device, a link, a file where a folder should be, a name too long)
stops the sweep before it starts; an attempt whose log cannot be created or written when its
turn comes (a full disk) is recorded as a failure with the reason, and the sweep goes on.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from dlbs.errors import ConfigError, LaunchError, OutputError, ResultsError
from dlbs.plan.checks import run_problems
from dlbs.recipes import Invocation, invocation_for
from dlbs.recipes.host_access import HostAccessWatch
from dlbs.recipes.tracing import trace_path, traces
from dlbs.results.protocol import parse_log
from dlbs.results.store import ResultsStore
from dlbs.run import marks, policy
from dlbs.run.environment import collect_environment
from dlbs.run.flight import Flight, SlurmFlights
from dlbs.run.interrupts import STOPPED_STATUS, StopRequest
from dlbs.run.job_results import (
    absorb_node_files,
    job_environment,
    job_usage,
    split_node_values,
)
from dlbs.run.judge import Verdict, judge
from dlbs.run.lock import RunLock
from dlbs.run.logs import (
    append_to_log,
    create_log,
    log_place_problem,
    trace_place_problem,
    write_header,
)
from dlbs.run.outcome import CANCELLED, INTERRUPTED, Outcome
from dlbs.run.pool import ProcessPool
from dlbs.run.targets.base import ProcessTarget, SchedulerTarget, Target, get_target
from dlbs.run.targets.slurm import MAX_ARRAY, SlurmTarget, SubmitLimit, job_name

Experiment = dict[str, Any]
FAILED = ("failure", "timeout", "cancelled")
REQUIRED = ("exp.id", "exp.log_file", "exp.framework")
#: The job id column holds `pending:<job name>:<array index>` from just before sbatch runs
#: until its answer is recorded: a loop killed in between finds the job by its name.
PENDING_PREFIX = "pending:"


class Reporter(Protocol):
    """What the CLI shows while the sweep runs."""

    def planned(self, total: int) -> None: ...
    def started(self, experiment: Experiment, log_path: str) -> None: ...
    def finished(self, experiment: Experiment, status: str, message: str | None,
                 log_path: str | None, seconds: float) -> None: ...
    def note(self, text: str) -> None: ...


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
        return 1 if any(self.counts.get(s) for s in FAILED) else 0


@dataclass
class _Job:
    experiment: Experiment
    target: Target
    invocation: Invocation


@dataclass
class _Attempt:
    """One attempt that was started: what the loop needs to finish it."""

    job: _Job
    store: ResultsStore
    number: int
    log_path: str
    begin: float
    #: When the attempt started, seconds since the epoch (the monitors' clocks count from it).
    started_epoch: float = 0.0
    #: What a later run needs to stop it if dlbs dies (local and container attempts).
    mark: dict[str, Any] | None = None


@dataclass
class Preview:
    """What `dlbs run` would do with one experiment (`--dry-run`), and the exact request."""

    experiment: Experiment
    action: str          # run, simulate, skip, or done/disabled (ignored)
    reason: str
    request: dict[str, Any] | None


@dataclass(frozen=True)
class SweepSettings:
    """How the whole sweep runs (configs/01-run.yaml); the same in every experiment."""

    max_parallel: int = 1
    max_in_flight: int = 0
    on_interrupt: str = "cancel"

    @classmethod
    def of(cls, experiments: Sequence[Mapping[str, Any]]) -> SweepSettings:
        """The settings of a plan; ConfigError when they differ between experiments."""
        problems = run_problems(experiments)  # type: ignore[arg-type]
        if problems:
            raise ConfigError(f"the plan cannot run: {problems[0]}",
                              hint="`dlbs validate` lists every problem")
        first = experiments[0] if experiments else {}
        settings = cls(_count(first, "runtime.max_parallel", 1, 1),
                       _count(first, "slurm.max_in_flight", 0, 0),
                       str(first.get("slurm.on_interrupt") or "cancel"))
        if settings.on_interrupt not in ("cancel", "keep"):
            raise ConfigError(f"slurm.on_interrupt: expected cancel or keep, got "
                              f"{settings.on_interrupt!r}")
        return settings


def _count(experiment: Mapping[str, Any], name: str, default: int, lowest: int) -> int:
    value = experiment.get(name, default)
    if value in (None, ""):
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        raise ConfigError(f"{name}: expected an integer >= {lowest}, got {value!r}")
    return value


class Sweep:
    """Runs a plan. `run()` returns the summary; LaunchError/ResultsError mean nothing ran."""

    def __init__(self, experiments: Sequence[Experiment], reporter: Reporter) -> None:
        self.experiments = list(experiments)
        self.reporter = reporter
        self.summary = Summary()
        self.stop = StopRequest()
        self._stores: dict[str, ResultsStore] = {}
        self._targets: dict[str, Target] = {}
        self._environment: dict[str, Any] | None = None
        self._reattached: set[str] = set()
        self._flights: SlurmFlights | None = None
        #: What `preview()` found worth a warning (containers that get the host).
        self.warnings: list[str] = []
        for experiment in self.experiments:
            missing = [k for k in REQUIRED if not experiment.get(k)]
            if missing:
                raise ConfigError(f"experiment {experiment.get('exp.id') or '#?'} has no "
                                  f"{', '.join(missing)}: dlbs run needs them",
                                  hint="keep the default configs (no --no-defaults), or "
                                       "define them in the spec")
        self.settings = SweepSettings.of(self.experiments)

    # -- the whole sweep ---------------------------------------------------------------
    def run(self) -> Summary:
        with contextlib.ExitStack() as stack:
            for log_dir in sorted({_log_dir(e) for e in self.experiments}):
                stack.enter_context(RunLock(log_dir))
            # A database shared by runs with other log folders: each would close the other's
            # live attempts as cut off.
            for database in sorted({self._store_path(e) for e in self.experiments}):
                stack.enter_context(RunLock.of_database(database))
            stack.callback(self._close)
            stack.enter_context(self.stop.catching())
            reattached = self._resume()
            # One query per database, not one per experiment: sweeps can be long.
            latest = {path: store.latest_statuses() for path, store in self._all_stores()}
            decisions = [(e, self._decide(e, latest)) for e in self.experiments]
            jobs = {id(e): self._job(e) for e, d in decisions
                    if d.action in (policy.RUN, policy.SIMULATE)}
            self._preflight(list(jobs.values()))
            for warning in self._host_access_warnings([jobs[id(e)] for e, d in decisions
                                                       if d.action == policy.RUN]):
                self.reporter.note(f"warning: {warning}")
            planned_ids = {e["exp.id"] for e in self.experiments}
            self.reporter.planned(len(decisions) + sum(
                1 for a, _ in reattached if a.job.experiment.get("exp.id") not in planned_ids))
            # In plan order: what to run, and what to record as skipped when its turn comes.
            pending: deque[tuple[Experiment, Any]] = deque()
            for experiment, decision in decisions:
                if not self._settle_at_once(experiment, decision, jobs.get(id(experiment))):
                    pending.append((experiment, jobs.get(id(experiment)) or decision))
            self._drive(pending, reattached)
        return self.summary

    def _decide(self, experiment: Experiment, latest: Mapping[str, Mapping[str, str]]
                ) -> policy.Decision:
        if experiment["exp.id"] in self._reattached:
            return policy.Decision(policy.IGNORE, "its SLURM job was re-attached")
        return policy.decide(experiment,
                             latest[self._store_path(experiment)].get(experiment["exp.id"]),
                             self._oom_limit(experiment))

    def preview(self) -> list[Preview]:
        """What would happen to every experiment, and each request (`--dry-run`).

        Reads the results stores that exist (never creates one) to tell what is already
        done; takes no lock and runs nothing.
        """
        stores: dict[str, ResultsStore | None] = {}
        latest: dict[str, dict[str, str]] = {}
        previews = []
        to_run: list[_Job] = []
        try:
            for experiment in self.experiments:
                path = self._store_path(experiment)
                if path not in stores:
                    stores[path] = (ResultsStore(path, create=False) if os.path.isfile(path)
                                    else None)
                    latest[path] = stores[path].latest_statuses() if stores[path] else {}
                store = stores[path]
                oom = store.oom_limit(*policy.oom_key(experiment)) if store else None
                decision = policy.decide(experiment, latest[path].get(experiment["exp.id"]),
                                         oom)
                request = None
                if decision.action in (policy.RUN, policy.SIMULATE):
                    job = self._job(experiment)
                    request = job.target.describe(job.invocation)
                    if decision.action == policy.RUN:
                        to_run.append(job)
                action = decision.action
                if action == policy.IGNORE:
                    action = "disabled" if "exp.status" in decision.reason else "done"
                previews.append(Preview(experiment, action, decision.reason, request))
            self.warnings = self._host_access_warnings(to_run)
        finally:
            for store in stores.values():
                if store is not None:
                    store.close()
            self._close()
        return previews

    # -- driving the sweep -----------------------------------------------------------------
    def _settle_at_once(self, experiment: Experiment, decision: policy.Decision,
                        job: _Job | None) -> bool:
        """Handle what needs no run (ignored, simulated); False for what must be started."""
        if decision.action == policy.IGNORE:
            if experiment.get("exp.id") not in self._reattached:
                self.summary.add("unchanged")
                self.reporter.finished(experiment, "unchanged", decision.reason, None, 0.0)
            return True
        if decision.action == policy.SIMULATE:
            assert job is not None
            self.reporter.note(f"simulate {experiment.get('exp.id')}: "
                               f"{job.target.describe(job.invocation)}")
            self.summary.add("simulated")
            return True
        return False

    def _record_skipped(self, experiment: Experiment, reason: str) -> None:
        store = self._store(experiment)
        exp_id = experiment["exp.id"]
        store.record_attempt(exp_id, store.next_attempt(exp_id), experiment, "skipped",
                             status_msg=reason, environment=self._env())
        self.summary.add("skipped")
        self.reporter.finished(experiment, "skipped", reason, None, 0.0)

    def _drive(self, pending: deque[tuple[Experiment, _Job]],
               reattached: list[tuple[_Attempt, str]]) -> None:
        """Start experiments as room allows and finish each as it ends, until all are done."""
        pool = ProcessPool(self.settings.max_parallel, on_report=self._record_mark)
        flights = self._flights_for(pending, reattached)
        for attempt, job_id in reattached:
            assert flights is not None
            flights.add(attempt, job_id, _timeout(attempt.job), submitted=False)
        try:
            while pending or pool.running or (flights and flights.active):
                if self.stop.requested:
                    break
                self._start_ready(pending, pool, flights)
                self._collect(pool, flights)
        finally:
            if self.stop.requested or pool.running or (flights and flights.active):
                self._wind_down(pool, flights)
            for _, job in pending:  # opened, refused by sbatch for a limit, never submitted
                if isinstance(job, _Prepared):
                    self._finish(job.attempt, Outcome("interrupted", "the sweep stopped before "
                                                      "this experiment's job was submitted"))

    def _flights_for(self, pending: deque[tuple[Experiment, _Job]],
                     reattached: list[tuple[_Attempt, str]]) -> SlurmFlights | None:
        if not reattached and not any(isinstance(getattr(j, "target", None), SchedulerTarget)
                                      for _, j in pending):
            return None
        target = self._target("slurm")
        assert isinstance(target, SlurmTarget)
        self._flights = SlurmFlights(target, self.settings.max_in_flight)
        return self._flights

    def _start_ready(self, pending: deque[tuple[Experiment, _Job]], pool: ProcessPool,
                     flights: SlurmFlights | None) -> None:
        """One pass over the plan: start what may start now, in plan order."""
        pool.new_round()
        to_submit: list[_Attempt] = []
        room = flights.room() if flights is not None else 0
        kept: deque[tuple[Experiment, _Job]] = deque()
        while pending:
            experiment, job = pending.popleft()
            if self.stop.requested:
                kept.append((experiment, job))
                continue
            if isinstance(job, policy.Decision):  # skipped (a smaller batch ran out of memory)
                self._record_skipped(experiment, job.reason)
                continue
            if isinstance(job.target, SchedulerTarget):
                if len(to_submit) >= room:
                    kept.append((experiment, job))
                    continue
                attempt = self._begin(job)
                if attempt is not None:
                    to_submit.append(attempt)
                continue
            gpus = job.invocation.gpus
            if not pool.can_start(gpus):
                pool.blocked(gpus)
                kept.append((experiment, job))
                continue
            attempt = self._begin(job)
            if attempt is not None:
                pool.start(attempt, gpus, self._work(attempt))
        pending.extend(kept)
        if to_submit:
            assert flights is not None
            refused = self._submit(to_submit, flights)
            for attempt in reversed(refused):  # back to the front, in plan order
                pending.appendleft((attempt.job.experiment, _Prepared(attempt)))  # type: ignore

    def _begin(self, job: _Job | _Prepared) -> _Attempt | None:
        """Open an attempt (log header, store row); None when it is skipped instead."""
        if isinstance(job, _Prepared):  # refused by sbatch before: the same attempt again
            return job.attempt
        experiment = job.experiment
        store = self._store(experiment)
        exp_id = experiment["exp.id"]
        # A failure earlier in this sweep may have taught a new out-of-memory limit.
        decision = policy.decide(experiment, None, self._oom_limit(experiment))
        if decision.action == policy.SKIP:
            self._record_skipped(experiment, decision.reason)
            return None
        number = store.next_attempt(exp_id)
        log_path: str | None = None
        try:
            log_path, log = create_log(str(experiment["exp.log_file"]), number)
            with log:
                write_header(log, experiment, number)
        except OSError as error:
            self._record_unstarted(job, store, number, log_path, error)
            return None
        # Recorded before it starts: whatever it starts carries the mark's token.
        mark = marks.new_mark(job.target.name) if isinstance(job.target, ProcessTarget) \
            else None
        store.record_start(exp_id, number, experiment, log_path=log_path,
                           environment=self._env(), job_id=marks.encode(mark) if mark else None)
        self.reporter.started(experiment, log_path)
        return _Attempt(job, store, number, log_path, time.monotonic(), time.time(), mark)

    def _record_unstarted(self, job: _Job, store: ResultsStore, number: int,
                          log_path: str | None, error: OSError) -> None:
        """An attempt whose log could not be created or written: a failure, with the reason."""
        experiment = job.experiment
        where = log_path or str(experiment["exp.log_file"])
        reason = f"could not start: cannot write its log {where}: {error.strerror or error}"
        store.record_attempt(experiment["exp.id"], number, experiment, "failure",
                             status_msg=reason, log_path=log_path, environment=self._env())
        self.summary.add("failure")
        self.summary.failures.append((experiment, "failure", reason, log_path))
        self.reporter.finished(experiment, "failure", reason, log_path, 0.0)

    def _work(self, attempt: _Attempt) -> Any:
        """The worker's part of a local or Docker attempt: run it, with the monitor."""
        job = attempt.job
        stop = self.stop.event

        def work(report: Any) -> tuple[Outcome, dict[str, Any], list[str]]:
            monitor = _monitor(job)
            target = job.target
            assert isinstance(target, ProcessTarget)

            def started(pid: int) -> None:
                if monitor is not None:
                    monitor.start(pid)
                if attempt.mark is not None:  # the loop's thread records it
                    report(marks.with_process(attempt.mark, pid))

            try:
                with append_to_log(attempt.log_path) as log:
                    outcome = target.run(job.invocation, log, _timeout(job), on_start=started,
                                         stop=stop,
                                         token=attempt.mark["token"] if attempt.mark else None)
            except LaunchError as error:
                outcome = Outcome("failure", f"could not start: {error.message}")
            except OSError as error:
                outcome = Outcome("failure", f"could not start: cannot write its log "
                                             f"{attempt.log_path}: {error.strerror or error}")
            finally:
                usage = monitor.stop() if monitor else {}
            return outcome, usage, list(monitor.warnings) if monitor else []

        return work

    def _record_mark(self, attempt: _Attempt, mark: dict[str, Any]) -> None:
        """A started benchmark's process tree root joins its attempt's mark."""
        attempt.mark = mark
        attempt.store.set_job_id(attempt.job.experiment["exp.id"], attempt.number,
                                 marks.encode(mark))

    def _submit(self, attempts: list[_Attempt], flights: SlurmFlights) -> list[_Attempt]:
        """Submit opened attempts, arrays where requests agree; those sbatch refused for a limit."""
        groups: dict[tuple[Any, ...], list[_Attempt]] = {}
        for attempt in attempts:
            batch = attempt.job.invocation.batch
            shape = batch.shape() if batch is not None else ()
            groups.setdefault(shape, []).append(attempt)
        refused: list[_Attempt] = []
        if self.stop.requested:  # opened just before the stop: never submitted
            for attempt in attempts:
                self._finish(attempt, Outcome("interrupted", "the sweep stopped before this "
                                                             "experiment's job was submitted"))
            return refused
        queue = [group[i:i + MAX_ARRAY] for group in groups.values()
                 for i in range(0, len(group), MAX_ARRAY)]
        while queue:
            group = queue.pop(0)
            if refused:  # a limit was hit: what follows waits too
                refused += group
                continue
            try:
                job_ids = self._sbatch(group, flights.target)
            except SubmitLimit as error:
                if len(group) > 1:  # perhaps the limit takes part of it: halves, at once
                    half = len(group) // 2
                    queue[:0] = [group[:half], group[half:]]
                    continue
                delay = flights.refused()
                refused += group
                waiting = len(refused) + sum(len(g) for g in queue)
                self.reporter.note(f"{error.message}; {waiting} experiment(s) wait for room "
                                   f"({flights.active} job(s) in flight; next try when one "
                                   f"ends, or in {delay:g} s)")
                continue
            except (LaunchError, OutputError) as error:  # OutputError: its job script
                for attempt in group:
                    self._finish(attempt, Outcome("failure", f"could not start: "
                                                             f"{error.message}"))
                continue
            flights.accepted()
            for attempt, job_id in zip(group, job_ids):
                attempt.store.set_job_id(attempt.job.experiment["exp.id"], attempt.number,
                                         job_id)
                flights.add(attempt, job_id, _timeout(attempt.job))
        return refused

    def _sbatch(self, group: list[_Attempt], target: SlurmTarget) -> list[str]:
        """Submit one group (a job, or an array); its pending names are recorded first."""
        label = group[0].job.invocation.label if len(group) == 1 else "array"
        name = job_name(f"{_name_part(label)}-{uuid.uuid4().hex[:8]}")
        for index, attempt in enumerate(group):
            attempt.store.set_job_id(attempt.job.experiment["exp.id"], attempt.number,
                                     f"{PENDING_PREFIX}{name}:{index if len(group) > 1 else ''}")
        if len(group) == 1:
            attempt = group[0]
            return [target.submit(attempt.job.invocation, attempt.log_path, name)]
        script = os.path.join(os.path.dirname(group[0].log_path), f"{name}.sbatch")
        return target.submit_array([(a.job.invocation, a.log_path) for a in group], script, name)

    def _collect(self, pool: ProcessPool, flights: SlurmFlights | None) -> None:
        """Finish what ended; wait a little (a poll interval) when nothing did."""
        wait = flights.interval if flights is not None and flights.active else 0.5
        if flights is not None and flights.active == 0 and flights.retry_in() > 0 \
                and not pool.running:
            wait = min(wait, flights.retry_in())
        finished = pool.finished(timeout=wait if pool.running else 0)
        for attempt, (outcome, usage, warnings) in finished:
            self._finish(attempt, self._stopped(outcome), usage, warnings)
        if flights is not None and flights.active:
            for flight, outcome in flights.poll():
                self._finish_flight(flight, outcome, flights)
        if not finished and not pool.running:
            self.stop.wait(wait)

    def _finish_flight(self, flight: Flight, outcome: Outcome, flights: SlurmFlights) -> None:
        attempt: _Attempt = flight.key
        if flight.cancelled_for == "skip" and outcome.status == CANCELLED:
            experiment = attempt.job.experiment
            attempt.store.record_end(experiment["exp.id"], attempt.number, "skipped",
                                     status_msg=flight.cancel_message)
            self.summary.add("skipped")
            self.reporter.finished(experiment, "skipped", flight.cancel_message,
                                   attempt.log_path, time.monotonic() - attempt.begin)
            return
        verdict = self._finish(attempt, outcome)
        if verdict.out_of_memory:
            self._cancel_larger_batches(attempt.job.experiment, flights)

    def _cancel_larger_batches(self, experiment: Experiment, flights: SlurmFlights) -> None:
        """An out-of-memory failure: cancel queued jobs of the same kind and a batch as large."""
        key = policy.oom_key(experiment)
        limit = experiment.get("exp.replica_batch")
        if not isinstance(limit, int) or experiment.get("exp.ignore_past_errors"):
            return

        def larger(flight: Flight) -> bool:
            other = flight.key.job.experiment
            batch = other.get("exp.replica_batch")
            return (policy.oom_key(other) == key and isinstance(batch, int) and batch >= limit
                    and not other.get("exp.ignore_past_errors"))

        cancelled = flights.cancel_queued(larger, lambda flight: (
            f"replica batch {flight.key.job.experiment.get('exp.replica_batch')} >= {limit}, "
            f"which ran out of memory (experiment {experiment['exp.id']}): its queued job "
            f"{flight.job_id} was cancelled (set exp.ignore_past_errors to try)"))
        if cancelled:
            self.reporter.note(f"cancelled {len(cancelled)} queued job(s) of larger batches "
                               f"after an out-of-memory failure of {experiment['exp.id']}")

    def _wind_down(self, pool: ProcessPool, flights: SlurmFlights | None) -> None:
        """A stop was requested (or the loop failed): stop what runs, settle every attempt.

        Local processes and containers are always stopped (they are dlbs's children). SLURM
        jobs are cancelled on a stop request with slurm.on_interrupt: cancel; after an error
        of dlbs itself they are kept, open with their job ids, for the next run to re-attach.
        """
        requested = self.stop.requested
        self.stop.event.set()  # the workers stop their processes and containers
        reason = self.stop.reason or "an error of dlbs"
        noted = False
        while pool.running:
            if self.stop.forced and not noted:
                noted = True
                self.reporter.note("a second stop signal: stopping without waiting")
            for attempt, (outcome, usage, warnings) in pool.finished(timeout=0.2):
                self._finish(attempt, self._stopped(outcome), usage, warnings)
        if flights is not None and flights.active:
            if self.settings.on_interrupt == "keep" or not requested:
                self.reporter.note(f"{flights.active} SLURM job(s) left queued or running "
                                   "(slurm.on_interrupt: keep): the next dlbs run re-attaches "
                                   "to them")
            else:
                flights.cancel_all(f"interrupted ({reason}); SLURM job {{job_id}} cancelled")
                for flight, outcome in flights.drain(give_up=self.stop.event.forced):
                    self._finish_flight(flight, outcome, flights)
                if flights.active:
                    self.reporter.note(f"{flights.active} cancelled SLURM job(s) did not end "
                                       "in time; the next dlbs run re-attaches to them")
        if requested:
            self.summary.interrupted = True
            self.summary.stopped_by = self.stop.reason
            self.summary.stop_status = self.stop.exit_status

    def _stopped(self, outcome: Outcome) -> Outcome:
        """A process or container stopped by the stop request: say what asked for it."""
        if outcome.status == INTERRUPTED and self.stop.reason:
            outcome.message = f"interrupted: dlbs run got {self.stop.reason}"
        return outcome

    # -- ending an attempt -------------------------------------------------------------------
    def _finish(self, attempt: _Attempt, outcome: Outcome, usage: Mapping[str, Any] | None = None,
                warnings: Sequence[str] = ()) -> Verdict:
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
        attempt.store.record_end(experiment["exp.id"], attempt.number, verdict.status,
                                 status_msg=verdict.message, results=verdict.results,
                                 environment=environment)
        if verdict.out_of_memory and isinstance(experiment.get("exp.replica_batch"), int):
            attempt.store.record_oom(*policy.oom_key(experiment),
                                     experiment["exp.replica_batch"], exp_id=experiment["exp.id"])
        self.summary.add(verdict.status)
        if verdict.status != "ok":
            self.summary.failures.append((experiment, verdict.status, verdict.message,
                                          attempt.log_path))
        self.reporter.finished(experiment, verdict.status, verdict.message, attempt.log_path,
                               time.monotonic() - attempt.begin)
        if verdict.status == "interrupted":
            self.summary.interrupted = True
        return verdict

    def _verdict(self, outcome: Outcome, attempt: _Attempt
                 ) -> tuple[Verdict, dict[str, Any] | None, dict[str, Any]]:
        """The verdict, and what the nodes of a SLURM job said (environment, usage)."""
        experiment = attempt.job.experiment
        try:
            printed = parse_log(attempt.log_path).values
        except Exception as error:  # noqa: BLE001 - a log we cannot read is the attempt's
            printed = {}
            outcome = Outcome("failure", f"cannot read the log: {error}")
        printed, environments, monitors = split_node_values(printed)
        verdict = judge(outcome, printed, experiment)
        if verdict.status == "failure" and "results.status_msg" not in printed:
            last = _last_output_line(attempt.log_path)
            if last:
                verdict.message = f"{verdict.message}; last output: {last}"
        return (verdict, job_environment(environments, self._env()),
                job_usage(monitors, attempt.started_epoch))

    # -- before the sweep ------------------------------------------------------------------
    def _resume(self) -> list[tuple[_Attempt, str]]:
        """Settle what an earlier run left open: jobs to re-attach, cut-off attempts.

        What a run that died left running on this host (its attempts' marks) is stopped
        first. Returns the SLURM jobs to follow (attempt, job id); nothing here waits for a
        job.
        """
        by_id = {e["exp.id"]: e for e in self.experiments}
        reattached: list[tuple[_Attempt, str]] = []
        for _, store in self._all_stores():
            for stored in store.pending_jobs():
                experiment = by_id.get(stored.exp_id, stored.params)
                job_id = str(stored.job_id)
                if marks.is_mark(job_id):
                    self._stop_leftovers(stored, store)
                    continue
                if job_id.startswith(PENDING_PREFIX):
                    job_id = self._find_lost_submission(stored, experiment, store)
                    if not job_id:
                        continue
                target = self._target("slurm")
                assert isinstance(target, SchedulerTarget)
                self.reporter.note(f"re-attaching to SLURM job {job_id} of "
                                   f"experiment {stored.exp_id}")
                started = _epoch(stored.started_at)
                job = _Job(experiment, target, _reattach_invocation(experiment))
                reattached.append((_Attempt(job, store, stored.attempt, str(stored.log_path),
                                            time.monotonic(), started), job_id))
                self._reattached.add(stored.exp_id)
            for stored in store.unfinished():
                store.record_end(stored.exp_id, stored.attempt, "interrupted",
                                 status_msg="dlbs stopped before this attempt ended")
        return reattached

    def _stop_leftovers(self, stored: Any, store: ResultsStore) -> None:
        """Stop what an attempt of a run that died left running; close it as interrupted."""
        mark = marks.decode(str(stored.job_id))
        what = f"experiment {stored.exp_id}, attempt {stored.attempt}"
        stopped: list[str] = []
        if mark is not None:
            try:
                target = self._target(str(mark["target"]))
                if isinstance(target, ProcessTarget):
                    stopped = target.stop_leftovers(_reattach_invocation(stored.params), mark)
            except LaunchError as error:
                self.reporter.note(f"cannot stop what {what} may have left running: "
                                   f"{error.message}")
        message = "dlbs stopped before this attempt ended"
        if stopped:
            listed = ", ".join(stopped)
            self.reporter.note(f"stopped {listed}, left running by a dlbs run that died "
                               f"({what})")
            message += f"; the next dlbs run stopped what it left running: {listed}"
        store.record_end(stored.exp_id, stored.attempt, "interrupted", status_msg=message)

    def _find_lost_submission(self, stored: Any, experiment: Experiment,
                              store: ResultsStore) -> str:
        """The job id of a submission whose answer was never recorded; "" if none was made.

        The attempt's job name is in its pending mark; SLURM (or its accounting) knows the
        job by that name when sbatch took it. When it did not, the attempt is closed as
        interrupted and runs again; when it did but the job is long forgotten, the log
        (which the job appends to) tells whether it ran.
        """
        _, name, index = str(stored.job_id).split(":", 2)
        target = self._target("slurm")
        assert isinstance(target, SlurmTarget)
        found = target.find_by_name(name)
        if index:
            found = [j for j in found if j.endswith(f"_{index}")] or \
                [f"{j}_{index}" for j in found if "_" not in j]
        if found:
            store.set_job_id(stored.exp_id, stored.attempt, found[0])
            return found[0]
        log_path = str(stored.log_path)
        absorb_node_files(log_path)
        try:
            printed = parse_log(log_path).values
        except Exception:  # noqa: BLE001 - no log: nothing ran
            printed = {}
        if "results.status" in printed or "results.time" in printed:
            # SLURM forgot the job, but it ran: its log holds what the backend printed.
            printed, _, _ = split_node_values(printed)
            verdict = judge(Outcome("ok", "SLURM no longer knows the job; judged by its log"),
                            printed, experiment)
            store.record_end(stored.exp_id, stored.attempt, verdict.status,
                             status_msg=verdict.message, results=verdict.results)
            self.summary.add(verdict.status)
            return ""
        store.record_end(stored.exp_id, stored.attempt, "interrupted",
                         status_msg="dlbs stopped while submitting this attempt's job; "
                                    "SLURM does not know it")
        return ""

    def _job(self, experiment: Experiment) -> _Job:
        invocation = invocation_for(experiment)
        return _Job(experiment, self._target(invocation.target), invocation)

    def _preflight(self, jobs: list[_Job]) -> None:
        by_target: dict[str, list[Invocation]] = {}
        for job in jobs:
            log_file = str(job.experiment["exp.log_file"])
            problem = log_place_problem(log_file)
            if problem:
                raise ResultsError(
                    f"exp.log_file {log_file} of experiment {job.experiment['exp.id']} "
                    f"{problem}", hint="a log is only ever a regular file that dlbs creates: "
                                       "point exp.log_file where nothing is, or at a file")
            if traces(job.experiment):
                trace_file = trace_path(job.experiment)
                problem = trace_place_problem(trace_file)
                if problem:
                    raise ResultsError(
                        f"exp.trace_file {trace_file} of experiment "
                        f"{job.experiment['exp.id']} {problem}",
                        hint="point exp.trace_file where nothing is (default: beside the log)")
            by_target.setdefault(job.target.name, []).append(job.invocation)
        for name, invocations in by_target.items():
            self._targets[name].preflight(invocations)

    @staticmethod
    def _host_access_warnings(jobs: list[_Job]) -> list[str]:
        """One warning per container flag that gives the container the host (host_access).

        The same texts as `dlbs plan` and `dlbs validate` give, from the very requests the
        run makes: with `--plan`, this is the first time anyone looks at them.
        """
        watch = HostAccessWatch()
        for job in jobs:
            if job.invocation.container is not None:
                watch.add(job.experiment, job.invocation.container.args)
        return watch.warnings()

    # -- shared state ------------------------------------------------------------------
    def _target(self, name: str) -> Target:
        if name not in self._targets:
            self._targets[name] = get_target(name)
        return self._targets[name]

    @staticmethod
    def _store_path(experiment: Mapping[str, Any]) -> str:
        return str(experiment.get("runtime.results_db") or
                   os.path.join(_log_dir(experiment), "results.db"))

    def _all_stores(self) -> list[tuple[str, ResultsStore]]:
        """Every results database of the plan, opened (created) once each."""
        for experiment in self.experiments:
            self._store(experiment)
        return list(self._stores.items())

    def _store(self, experiment: Mapping[str, Any]) -> ResultsStore:
        path = self._store_path(experiment)
        if path not in self._stores:
            self._stores[path] = ResultsStore(path)  # creates its folder, or says why not
        return self._stores[path]

    def _oom_limit(self, experiment: Mapping[str, Any]) -> int | None:
        return self._store(experiment).oom_limit(*policy.oom_key(experiment))

    def _env(self) -> dict[str, Any]:
        if self._environment is None:
            self._environment = collect_environment()
        return self._environment

    def _close(self) -> None:
        for store in self._stores.values():
            store.close()
        for target in self._targets.values():
            target.close()


@dataclass
class _Prepared:
    """A SLURM attempt opened before, whose submission sbatch refused for a limit."""

    attempt: _Attempt

    @property
    def target(self) -> Target:
        return self.attempt.job.target

    @property
    def invocation(self) -> Invocation:
        return self.attempt.job.invocation


def _reattach_invocation(experiment: Experiment) -> Invocation:
    """The invocation of a re-attached experiment (for its label); a bare one if it fails."""
    try:
        return invocation_for(experiment)
    except Exception:  # noqa: BLE001 - an old plan's experiment may no longer build
        return Invocation(argv=[], label=str(experiment.get("exp.id")))


def _timeout(job: _Job) -> float | None:
    try:
        return float(job.experiment.get("exp.timeout") or 0) or None
    except (TypeError, ValueError):
        return None


def _epoch(text: str | None) -> float:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return time.time()


def _name_part(label: str) -> str:
    return "".join(c if c.isalnum() or c in "_.-" else "-" for c in label)[:40]


def _monitor(job: _Job) -> Any:
    """A resource monitor when `monitor.frequency` > 0 and the target runs here."""
    frequency = job.invocation.monitor_frequency
    if frequency <= 0 or not isinstance(job.target, ProcessTarget):
        return None
    from dlbs.monitor import ResourceMonitor

    return ResourceMonitor(frequency, job.invocation.gpus)


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


def _log_dir(experiment: Mapping[str, Any]) -> str:
    return str(experiment.get("exp.log_dir") or
               os.path.dirname(str(experiment.get("exp.log_file") or "")) or ".")
