"""The run loop: every experiment of a plan, where its parameters say, with resume.

Order of work: take the run lock of each log folder; finish what an earlier `dlbs run`
left (re-attach to SLURM jobs still queued or running, mark attempts that were cut off as
interrupted); decide what to run; check every target before anything starts (pre-flight);
then run the experiments one by one, recording each attempt's start before it runs and its
end after, so that a crash of dlbs itself loses nothing and repeats nothing that ended.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dlbs.errors import ConfigError, LaunchError
from dlbs.recipes import Invocation, invocation_for
from dlbs.results.protocol import parse_log
from dlbs.results.store import ResultsStore
from dlbs.run import policy
from dlbs.run.environment import collect_environment
from dlbs.run.judge import Verdict, judge
from dlbs.run.lock import RunLock
from dlbs.run.logs import attempt_log_path, write_header
from dlbs.run.outcome import Outcome
from dlbs.run.targets.base import ProcessTarget, SchedulerTarget, Target, get_target

Experiment = dict[str, Any]
FAILED = ("failure", "timeout", "cancelled")
REQUIRED = ("exp.id", "exp.log_file", "exp.framework")


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

    def add(self, status: str) -> None:
        self.counts[status] = self.counts.get(status, 0) + 1

    @property
    def exit_status(self) -> int:
        if self.interrupted:
            return 130
        return 1 if any(self.counts.get(s) for s in FAILED) else 0


@dataclass
class _Job:
    experiment: Experiment
    target: Target
    invocation: Invocation


@dataclass
class Preview:
    """What `dlbs run` would do with one experiment (`--dry-run`), and the exact request."""

    experiment: Experiment
    action: str          # run, simulate, skip, or done/disabled (ignored)
    reason: str
    request: dict[str, Any] | None


class Sweep:
    """Runs a plan. `run()` returns the summary; LaunchError/ResultsError mean nothing ran."""

    def __init__(self, experiments: Sequence[Experiment], reporter: Reporter) -> None:
        self.experiments = list(experiments)
        self.reporter = reporter
        self.summary = Summary()
        self._stores: dict[str, ResultsStore] = {}
        self._targets: dict[str, Target] = {}
        self._environment: dict[str, Any] | None = None
        self._reattached: set[str] = set()
        for experiment in self.experiments:
            missing = [k for k in REQUIRED if not experiment.get(k)]
            if missing:
                raise ConfigError(f"experiment {experiment.get('exp.id') or '#?'} has no "
                                  f"{', '.join(missing)}: dlbs run needs them",
                                  hint="keep the default configs (no --no-defaults), or "
                                       "define them in the spec")

    # -- the whole sweep ---------------------------------------------------------------
    def run(self) -> Summary:
        with contextlib.ExitStack() as stack:
            for log_dir in sorted({_log_dir(e) for e in self.experiments}):
                stack.enter_context(RunLock(log_dir))
            stack.callback(self._close)
            self._resume()
            # One query per database, not one per experiment: sweeps can be long.
            latest = {path: store.latest_statuses() for path, store in self._all_stores()}
            decisions = [(e, policy.decide(e, latest[self._store_path(e)].get(e["exp.id"]),
                                           self._oom_limit(e))) for e in self.experiments]
            jobs = {id(e): self._job(e) for e, d in decisions
                    if d.action in (policy.RUN, policy.SIMULATE)}
            self._preflight([job for job in jobs.values()])
            self.reporter.planned(len(decisions))
            for experiment, decision in decisions:
                if self.summary.interrupted:
                    break
                self._one(experiment, decision, jobs.get(id(experiment)))
        return self.summary

    def preview(self) -> list[Preview]:
        """What would happen to every experiment, and each request (`--dry-run`).

        Reads the results stores that exist (never creates one) to tell what is already
        done; takes no lock and runs nothing.
        """
        stores: dict[str, ResultsStore | None] = {}
        latest: dict[str, dict[str, str]] = {}
        previews = []
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
                action = decision.action
                if action == policy.IGNORE:
                    action = "disabled" if "exp.status" in decision.reason else "done"
                previews.append(Preview(experiment, action, decision.reason, request))
        finally:
            for store in stores.values():
                if store is not None:
                    store.close()
            self._close()
        return previews

    # -- one experiment -----------------------------------------------------------------
    def _one(self, experiment: Experiment, decision: policy.Decision, job: _Job | None) -> None:
        if decision.action == policy.IGNORE:
            if experiment.get("exp.id") in self._reattached:
                return  # counted when its job was re-attached
            self.summary.add("unchanged")
            self.reporter.finished(experiment, "unchanged", decision.reason, None, 0.0)
            return
        if decision.action == policy.SIMULATE:
            assert job is not None
            self.reporter.note(f"simulate {experiment.get('exp.id')}: "
                               f"{job.target.describe(job.invocation)}")
            self.summary.add("simulated")
            return
        # A failure earlier in this sweep may have taught a new out-of-memory limit.
        if decision.action == policy.RUN:
            decision = policy.decide(experiment, None, self._oom_limit(experiment))
        store = self._store(experiment)
        exp_id = experiment["exp.id"]
        if decision.action == policy.SKIP:
            store.record_attempt(exp_id, store.next_attempt(exp_id), experiment, "skipped",
                                 status_msg=decision.reason, environment=self._env())
            self.summary.add("skipped")
            self.reporter.finished(experiment, "skipped", decision.reason, None, 0.0)
            return
        assert job is not None
        self._attempt(job, store)

    def _attempt(self, job: _Job, store: ResultsStore) -> None:
        experiment = job.experiment
        exp_id = experiment["exp.id"]
        attempt = store.next_attempt(exp_id)
        log_path = attempt_log_path(str(experiment["exp.log_file"]), attempt)
        os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
        with open(log_path, "wb") as log:
            write_header(log, experiment, attempt)
        store.record_start(exp_id, attempt, experiment, log_path=log_path,
                           environment=self._env())
        self.reporter.started(experiment, log_path)
        begin = time.monotonic()
        timeout = float(experiment.get("exp.timeout") or 0) or None
        monitor = _monitor(experiment, job)
        try:
            if isinstance(job.target, SchedulerTarget):
                job_id = job.target.submit(job.invocation, log_path)
                store.set_job_id(exp_id, attempt, job_id)
                outcome = job.target.wait(job_id, timeout)
            else:
                assert isinstance(job.target, ProcessTarget)
                with open(log_path, "ab") as log:
                    outcome = job.target.run(job.invocation, log, timeout,
                                             on_start=monitor.start if monitor else None)
        except LaunchError as error:
            outcome = Outcome("failure", f"could not start: {error.message}")
        except KeyboardInterrupt:
            outcome = Outcome("interrupted", "interrupted by the user")
        finally:
            usage = monitor.stop() if monitor else {}
        verdict = self._verdict(outcome, log_path, experiment)
        verdict.results.update({f"results.use.{name}": values
                                for name, values in usage.items() if values})
        if monitor is not None and monitor.warnings:
            verdict.results["results.use.warnings"] = list(monitor.warnings)
        self._finish(store, experiment, attempt, verdict, log_path, time.monotonic() - begin)
        if verdict.status == "interrupted":
            self.summary.interrupted = True

    def _verdict(self, outcome: Outcome, log_path: str, experiment: Experiment) -> Verdict:
        try:
            printed = parse_log(log_path).values
        except Exception as error:  # noqa: BLE001 - a log we cannot read is the attempt's
            printed = {}
            outcome = Outcome("failure", f"cannot read the log: {error}")
        verdict = judge(outcome, printed, experiment)
        if verdict.status == "failure" and "results.status_msg" not in printed:
            last = _last_output_line(log_path)
            if last:
                verdict.message = f"{verdict.message}; last output: {last}"
        return verdict

    def _finish(self, store: ResultsStore, experiment: Experiment, attempt: int,
                verdict: Verdict, log_path: str, seconds: float) -> None:
        store.record_end(experiment["exp.id"], attempt, verdict.status,
                         status_msg=verdict.message, results=verdict.results)
        if verdict.out_of_memory and isinstance(experiment.get("exp.replica_batch"), int):
            store.record_oom(*policy.oom_key(experiment), experiment["exp.replica_batch"],
                             exp_id=experiment["exp.id"])
        self.summary.add(verdict.status)
        if verdict.status != "ok":
            self.summary.failures.append((experiment, verdict.status, verdict.message,
                                          log_path))
        self.reporter.finished(experiment, verdict.status, verdict.message, log_path, seconds)

    # -- before the sweep ------------------------------------------------------------------
    def _resume(self) -> None:
        """Settle what an earlier run left open: re-attach jobs, close cut-off attempts."""
        by_id = {e["exp.id"]: e for e in self.experiments}
        for _, store in self._all_stores():
            for attempt in store.pending_jobs():
                experiment = by_id.get(attempt.exp_id, attempt.params)
                target = self._target("slurm")
                assert isinstance(target, SchedulerTarget)
                self.reporter.note(f"re-attaching to SLURM job {attempt.job_id} of "
                                   f"experiment {attempt.exp_id}")
                outcome = target.wait(str(attempt.job_id),
                                      float(experiment.get("exp.timeout") or 0) or None)
                verdict = self._verdict(outcome, str(attempt.log_path), experiment)
                self._finish(store, experiment, attempt.attempt, verdict,
                             str(attempt.log_path), 0.0)
                self._reattached.add(attempt.exp_id)
            for attempt in store.unfinished():
                store.record_end(attempt.exp_id, attempt.attempt, "interrupted",
                                 status_msg="dlbs stopped before this attempt ended")

    def _job(self, experiment: Experiment) -> _Job:
        invocation = invocation_for(experiment)
        return _Job(experiment, self._target(invocation.target), invocation)

    def _preflight(self, jobs: list[_Job]) -> None:
        by_target: dict[str, list[Invocation]] = {}
        for job in jobs:
            by_target.setdefault(job.target.name, []).append(job.invocation)
        for name, invocations in by_target.items():
            self._targets[name].preflight(invocations)

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
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            self._stores[path] = ResultsStore(path)
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


def _monitor(experiment: Mapping[str, Any], job: _Job) -> Any:
    """A resource monitor when `monitor.frequency` > 0 and the target runs here."""
    frequency = float(experiment.get("monitor.frequency") or 0)
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
