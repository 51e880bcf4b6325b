"""The run loop: every experiment of a plan, where its parameters say, with resume.

Order of work: take the run lock of each log folder and of each results database; finish
what an earlier `dlbs run` left (`dlbs.run.resume`: re-attach to scheduler jobs still queued
or running, stop the processes and containers that a run killed with `kill -9` left running,
mark attempts that were cut off as interrupted); decide what to run (`dlbs.run.policy`);
check every target and every log's place before anything starts (pre-flight), and warn of
containers that get the host; then start experiments in plan order as room allows
(`dlbs.run.scheduling`), recording each attempt's start before it runs and its end after
(`dlbs.run.recording`), so that a crash of dlbs itself loses nothing, repeats nothing that
ended, and leaves nothing running for long. The loop knows targets only through their
interface (`dlbs.run.targets`: `ProcessTarget`, `SchedulerTarget`), found by the name each
invocation gives.
This thread alone touches the results stores. Ctrl-C, SIGTERM and SIGHUP all become one stop
request (`dlbs.run.interrupts`): running processes and containers are stopped, scheduler jobs
are cancelled or left to re-attach (`slurm.on_interrupt`), and the sweep ends with 128 + the
signal's number (130, 143, 129); a second signal stops without waiting for graceful ends.
A log that cannot be one (a device, a link, a file where a folder should be, a name too long)
stops the sweep before it starts; an attempt whose log cannot be created or written when its
turn comes (a full disk) is recorded as a failure with the reason, and the sweep goes on.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dlbs.errors import ConfigError, LaunchError, ResultsError
from dlbs.plan.checks import run_problems
from dlbs.recipes import Invocation, invocation_for
from dlbs.recipes.host_access import HostAccessWatch
from dlbs.recipes.tracing import trace_path, traces, untraced_note
from dlbs.results.store import ResultsStore, is_store_url, store_name
from dlbs.run import oom_limits, policy
from dlbs.run.host_check import HostCheck
from dlbs.run.interrupts import StopRequest
from dlbs.run.lock import RunLock
from dlbs.run.logs import log_place_problem, trace_place_problem
from dlbs.run.recording import (
    FAILED_EARLIER,
    Experiment,
    Job,
    Recorder,
    Reporter,
    Summary,
    log_dir,
    run_tag,
    store_path,
)
from dlbs.run.resume import EarlierRuns
from dlbs.run.scheduling import Driver, Pending
from dlbs.run.targets import OpenTargets
from dlbs.util.credentials import ExperimentMask

REQUIRED = ("exp.id", "exp.log_file", "exp.framework")

__all__ = ["Preview", "Reporter", "Summary", "Sweep", "SweepSettings"]


@dataclass
class Preview:
    """What `dlbs run` would do with one experiment (`--dry-run`), and the exact request."""

    experiment: Experiment
    action: str          # run, simulate, skip, fail, or done/disabled (ignored)
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
        self.stop = StopRequest()
        self.recorder = Recorder(reporter)
        self.targets = OpenTargets()
        self._reattached: set[str] = set()
        #: The inputs and GPUs each experiment needs from this host (nvidia-smi asked once).
        self._host = HostCheck()
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
        # An experiment without runtime.run_tag is recorded under the time this run began
        # (its point in the history); resuming it still looks at every attempt, as before
        # tags (docs/results.md). The tags the user set decide how each one resumes.
        started = datetime.now(UTC).isoformat(timespec="seconds")
        self._resume_tags = {id(e): run_tag(e) for e in self.experiments}
        for experiment in self.experiments:
            if self._resume_tags[id(experiment)] is None:
                experiment["runtime.run_tag"] = started
            # What is recorded and logged names a store without the password its URL may
            # hold, as does any value that quotes the URL; the recorder keeps the URL itself
            # to open it (docs/security.md).
            location = store_path(experiment)
            if is_store_url(location):
                shown = store_name(location)
                self.recorder.locations[shown] = location
                experiment.update(ExperimentMask()(experiment))
                experiment["runtime.results_db"] = shown

    @property
    def summary(self) -> Summary:
        return self.recorder.summary

    # -- the whole sweep ---------------------------------------------------------------
    def run(self) -> Summary:
        with contextlib.ExitStack() as stack:
            for folder in sorted({log_dir(e) for e in self.experiments}):
                stack.enter_context(RunLock(folder))
            stack.callback(self._close)
            # Each store's run lock, and what this run may settle in it: runs with other log
            # folders (or hosts) on one store would close each other's live attempts
            # (ResultsStore.claim: one run at a time on SQLite, one per host and folder on
            # PostgreSQL).
            for location, store in self.recorder.all_stores(self.experiments):
                folders = sorted({os.path.abspath(log_dir(e)) for e in self.experiments
                                  if store_path(e) == location})
                stack.enter_context(store.claim(socket.gethostname(), folders))
            stack.enter_context(self.stop.catching())
            reattached = EarlierRuns(self.recorder, self.targets).settle(self.experiments)
            self._reattached = {attempt.exp_id for attempt, _ in reattached}
            # One query per database (and run tag), not one per experiment: sweeps can be long.
            latest: dict[tuple[str, str | None], Places] = {}
            for experiment in self.experiments:
                _resume_statuses(self.recorder.store(experiment), store_path(experiment),
                                 self._resume_tags[id(experiment)], latest)
            decisions = [(e, self._decide(e, latest)) for e in self.experiments]
            for note in _recorded_elsewhere(decisions, {
                    str(e["exp.id"]): self._place(e, latest)[1] for e in self.experiments}):
                self.reporter.note(note)
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
            pending: Pending = deque()
            for experiment, decision in decisions:
                if not self._settle_at_once(experiment, decision, jobs.get(id(experiment))):
                    pending.append((experiment, jobs.get(id(experiment)) or decision))
            # "unchanged" alone would not say that a trace asked for was not taken.
            untraced = untraced_note(e for e, d in decisions if d.action == policy.IGNORE
                                     and "exp.status" not in d.reason)
            if untraced:
                self.reporter.note(f"warning: {untraced}")
            Driver(self.recorder, self.stop, self.settings.max_parallel,
                   self.settings.max_in_flight, self.settings.on_interrupt
                   ).drive(pending, reattached)
        return self.summary

    def _decide(self, experiment: Experiment,
                latest: Mapping[tuple[str, str | None], Mapping[str, str]]) -> policy.Decision:
        if experiment["exp.id"] in self._reattached:
            return policy.Decision(policy.IGNORE, "its job was re-attached")
        return self._host_checked(experiment, policy.decide(
            experiment, self._place(experiment, latest)[0],
            self.recorder.oom_limit(experiment)))

    def _place(self, experiment: Experiment,
               latest: Mapping[tuple[str, str | None], Places]) -> tuple[str | None, str | None]:
        """The newest stored attempt's (status, folder) that resuming reads; Nones if none."""
        places = latest[(store_path(experiment), self._resume_tags[id(experiment)])]
        return places.get(str(experiment["exp.id"]), (None, None))

    def _host_checked(self, experiment: Experiment, decision: policy.Decision
                      ) -> policy.Decision:
        """A run becomes a failure when an input or a GPU it needs is not on this host."""
        if decision.action != policy.RUN:
            return decision
        missing = self._host.missing(experiment)
        if not missing:
            return decision
        return policy.Decision(policy.FAIL, "not started: " + "; ".join(map(str, missing)))

    def preview(self) -> list[Preview]:
        """What would happen to every experiment, and each request (`--dry-run`).

        Reads the results stores that exist (never creates one) to tell what is already
        done; takes no lock and runs nothing.
        """
        stores = dict(self.recorder.existing_stores(self.experiments))
        previews = []
        to_run: list[Job] = []
        latest: dict[tuple[str, str | None], Places] = {}
        try:
            for experiment in self.experiments:
                path = store_path(experiment)
                store = stores[path]
                _resume_statuses(store, path, self._resume_tags[id(experiment)], latest)
                oom = oom_limits.oom_limit(store, policy.oom_key(experiment)) if store else None
                decision = self._host_checked(experiment, policy.decide(
                    experiment, self._place(experiment, latest)[0], oom))
                request = None
                if decision.action in (policy.RUN, policy.SIMULATE):
                    job = self._job(experiment)
                    request = job.target.describe(job.invocation)
                    if decision.action == policy.RUN:
                        to_run.append(job)
                elif decision.action == policy.FAIL:  # what it would ask for, where it can
                    with contextlib.suppress(LaunchError):
                        job = self._job(experiment)
                        request = job.target.describe(job.invocation)
                action = decision.action
                if decision.failed_earlier:
                    action = FAILED_EARLIER
                elif action == policy.IGNORE:
                    action = "disabled" if "exp.status" in decision.reason else "done"
                previews.append(Preview(experiment, action, decision.reason, request))
            self.warnings = self._host_access_warnings(to_run)
            untraced = untraced_note(p.experiment for p in previews if p.action == "done")
            if untraced:
                self.warnings.append(untraced)
        finally:
            for store in stores.values():
                if store is not None:
                    store.close()
            self._close()
        return previews

    def _settle_at_once(self, experiment: Experiment, decision: policy.Decision,
                        job: Job | None) -> bool:
        """Handle what needs no run (ignored, failed here, simulated); False to start it."""
        if decision.action == policy.FAIL:
            self.recorder.not_started(experiment, decision.reason)
            return True
        if decision.failed_earlier:
            message = (f"an earlier run recorded {decision.recorded}; not run again, as "
                       f"exp.rerun is {experiment.get('exp.rerun') or 'never'}")
            self.summary.add(FAILED_EARLIER)
            self.summary.failures.append((experiment, FAILED_EARLIER, message, None))
            self.reporter.finished(experiment, FAILED_EARLIER, message, None, 0.0)
            return True
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

    # -- before the sweep ------------------------------------------------------------------
    def _job(self, experiment: Experiment) -> Job:
        invocation = invocation_for(experiment)
        return Job(experiment, self.targets.get(invocation.target), invocation)

    def _preflight(self, jobs: list[Job]) -> None:
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
            self.targets.get(name).preflight(invocations)

    @staticmethod
    def _host_access_warnings(jobs: list[Job]) -> list[str]:
        """One warning per container flag that gives the container the host (host_access).

        The same texts as `dlbs plan` and `dlbs validate` give, from the very requests the
        run makes: with `--plan`, this is the first time anyone looks at them.
        """
        watch = HostAccessWatch()
        for job in jobs:
            if job.invocation.container is not None:
                watch.add(job.experiment, job.invocation.container.args)
        return watch.warnings()

    def _close(self) -> None:
        self.recorder.close()
        self.targets.close()


Places = dict[str, tuple[str, str | None]]


def _resume_statuses(store: ResultsStore | None, location: str, tag: str | None,
                     latest: dict[tuple[str, str | None], Places]) -> Places:
    """What resuming reads: each newest attempt's status and folder (memoised).

    Per tag and host when the user set a tag.
    """
    key = (location, tag)
    if key not in latest:
        latest[key] = {} if store is None else (
            store.latest_places() if tag is None else
            store.latest_places(tag, socket.gethostname()))
    return latest[key]


def _recorded_elsewhere(decisions: Sequence[tuple[Experiment, policy.Decision]],
                        places: Mapping[str, str | None]) -> list[str]:
    """Notes on experiments not run again whose results another log folder holds.

    A second folder with the same store, run tag and host resumes the first one's
    experiments: their logs and results are where that run put them.
    """
    elsewhere: dict[str, int] = {}
    for experiment, decision in decisions:
        folder = places.get(str(experiment["exp.id"]))
        if decision.action == policy.IGNORE and decision.recorded and folder and \
                folder != os.path.abspath(log_dir(experiment)):
            elsewhere[folder] = elsewhere.get(folder, 0) + 1
    return [f"{count} experiment{'s' if count > 1 else ''} already recorded by a run in {folder} "
            f"(same results store, run tag and host) {'were' if count > 1 else 'was'} not run "
            f"again: their logs are there (dlbs report {folder}); a new runtime.run_tag "
            "measures them again" for folder, count in sorted(elsewhere.items())]
