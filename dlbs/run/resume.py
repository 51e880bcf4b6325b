"""Resume: what earlier `dlbs run`s left open in the plan's results stores, settled first.

Before a sweep decides what to run, every open attempt of its stores is settled (the run
holds the stores' locks, so no live run owns any of them; an attempt whose mark names a run
that still runs on this host means another run uses the database under a name the lock
could not see, and stops this one before it touches anything):
- a local or container attempt (its job id is a mark, `dlbs.run.marks`): what it may still
  run on this host is stopped (`ProcessTarget.stop_leftovers`) and it is closed interrupted;
- a scheduler's attempt with a job id: re-attached, followed like a job this run submitted,
  when the scheduler's job is the attempt's (`SchedulerTarget.adoption`: its name is the
  submission's the attempt recorded, it is this user's and runs the attempt's experiment);
  else closed interrupted with the reason, and the job is left alone: an attempt is a row
  of a store, which whoever can write to the store wrote (docs/security.md);
- a scheduler's attempt whose submission's answer was never recorded (a pending name): found
  by its name among this user's jobs (`SchedulerTarget.find_submitted`) and re-attached as
  above; when the scheduler never took it, closed interrupted; when it forgot it, judged by
  its log;
- any other open attempt (dlbs died before it started anything): closed interrupted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from dlbs.errors import LaunchError, ResultsError
from dlbs.recipes import Invocation, invocation_for, target_name
from dlbs.results.protocol import parse_log
from dlbs.results.store import ResultsStore
from dlbs.run import marks
from dlbs.run.job_results import absorb_node_files, split_node_values
from dlbs.run.judge import judge
from dlbs.run.outcome import Outcome
from dlbs.run.recording import Attempt, Experiment, Job, Recorder
from dlbs.run.targets import OpenTargets, ProcessTarget, SchedulerTarget

INTERRUPTED_MESSAGE = "dlbs stopped before this attempt ended"


class EarlierRuns:
    """Settles the open attempts of a plan's stores; see the module doc."""

    def __init__(self, recorder: Recorder, targets: OpenTargets) -> None:
        self.recorder = recorder
        self.targets = targets
        self.reporter = recorder.reporter

    def settle(self, experiments: Sequence[Experiment]) -> list[tuple[Attempt, str]]:
        """Settle every open attempt; the scheduler jobs to follow (attempt, job id).

        Nothing here waits for a job.
        """
        by_id = {e["exp.id"]: e for e in experiments}
        reattached: list[tuple[Attempt, str]] = []
        stores = self.recorder.all_stores(experiments)
        for path, store in stores:
            _refuse_a_live_owner(path, store.pending_jobs())
        for _, store in stores:
            for stored in store.pending_jobs():
                experiment = by_id.get(stored.exp_id, stored.params)
                job_id = str(stored.job_id)
                if marks.is_mark(job_id):
                    self._stop_leftovers(stored, store)
                    continue
                target = self._scheduler(stored)
                if target is None:
                    self._end(store, stored, "interrupted", INTERRUPTED_MESSAGE)
                    continue
                adopted = self._adopted(target, stored, experiment, store)
                if adopted is None:
                    continue
                job_id = adopted
                self.reporter.note(f"re-attaching to {target.job_word} {job_id} of "
                                   f"experiment {stored.exp_id}")
                job = Job(experiment, target, reattach_invocation(experiment))
                reattached.append((Attempt(job, store, stored.attempt, str(stored.log_path),
                                           time.monotonic(), _epoch(stored.started_at),
                                           started_at=stored.started_at), job_id))
            for stored in store.unfinished():
                self._end(store, stored, "interrupted", INTERRUPTED_MESSAGE)
        return reattached

    def _end(self, store: ResultsStore, stored: Any, status: str, message: str | None,
             results: dict[str, Any] | None = None) -> None:
        """Close an open attempt of an earlier run: its store and its log (Recorder.end)."""
        self.recorder.end(store, stored.exp_id, stored.attempt, stored.log_path,
                          stored.started_at, status, message, results)

    def _adopted(self, target: SchedulerTarget, stored: Any, experiment: Experiment,
                 store: ResultsStore) -> str | None:
        """The job id to re-attach to, or None: the attempt is closed (or judged) here.

        Only a job the scheduler says is the attempt's is adopted; of any other the reason
        is said, the attempt is closed interrupted, and the job is neither followed nor
        cancelled.
        """
        recorded = str(stored.job_id)
        if marks.is_pending(recorded):
            name, index = marks.decode_pending(recorded)
            why = marks.name_mismatch(name, stored.exp_id, array=index is not None)
            if why is None:
                job_id = self._find_lost_submission(target, stored, experiment, store, name,
                                                    index)
                if not job_id:
                    return None
                why = target.adoption(job_id, name, str(stored.exp_id))
                if why is None:  # the scheduler's answer, recorded at last
                    store.set_job_id(stored.exp_id, stored.attempt, marks.submitted(job_id, name))
        else:
            job_id, found_name = marks.decode_submitted(recorded)
            name = found_name or ""
            why = marks.name_mismatch(found_name, stored.exp_id) or \
                target.adoption(job_id, name, str(stored.exp_id))
        if why is None:
            return job_id
        what = f"{target.job_word} {job_id[:60] if job_id.isprintable() else repr(job_id[:60])}"
        self.reporter.note(f"not re-attaching to {what} of experiment {stored.exp_id}: {why}; "
                           "the attempt is closed, and the job left alone")
        self._end(store, stored, "interrupted",
                  f"{INTERRUPTED_MESSAGE}; not re-attached to {what}: {why}")
        return None

    def _scheduler(self, stored: Any) -> SchedulerTarget | None:
        """The scheduler an attempt was submitted to (as its recorded parameters say)."""
        try:
            name = target_name(stored.params)
        except LaunchError:  # parameters no scheduler was ever chosen by
            return None
        target = self.targets.get(name)
        return target if isinstance(target, SchedulerTarget) else None

    def _stop_leftovers(self, stored: Any, store: ResultsStore) -> None:
        """Stop what an attempt of a run that died left running; close it as interrupted."""
        mark = marks.decode(str(stored.job_id))
        what = f"experiment {stored.exp_id}, attempt {stored.attempt}"
        stopped: list[str] = []
        if mark is not None:
            try:
                target = self.targets.get(str(mark["target"]))
                if isinstance(target, ProcessTarget):
                    stopped = target.stop_leftovers(reattach_invocation(stored.params), mark)
            except LaunchError as error:
                self.reporter.note(f"cannot stop what {what} may have left running: "
                                   f"{error.message}")
        message = INTERRUPTED_MESSAGE
        if stopped:
            listed = ", ".join(stopped)
            self.reporter.note(f"stopped {listed}, left running by a dlbs run that died "
                               f"({what})")
            message += f"; the next dlbs run stopped what it left running: {listed}"
        self._end(store, stored, "interrupted", message)

    def _find_lost_submission(self, target: SchedulerTarget, stored: Any,
                              experiment: Experiment, store: ResultsStore, name: str,
                              index: int | None) -> str:
        """The job id of a submission whose answer was never recorded; "" if none was made.

        The attempt's submission name is in its pending mark; the scheduler (or its
        accounting) knows the job by that name when it took it. When it did not, the attempt
        is closed as interrupted and runs again; when it did but the job is long forgotten,
        the log (which the job appends to) tells whether it ran.
        """
        found = target.find_submitted(name, index)
        if found:
            return found
        log_path = str(stored.log_path)
        absorb_node_files(log_path)
        try:
            printed = parse_log(log_path).printed   # what ran printed, not the header
        except Exception:  # noqa: BLE001 - no log: nothing ran
            printed = {}
        if "results.status" in printed or "results.time" in printed:
            # The scheduler forgot the job, but it ran: its log holds what the backend printed.
            printed, _, _ = split_node_values(printed)
            verdict = judge(Outcome("ok", f"{target.display_name} no longer knows the job; "
                                          "judged by its log"), printed, experiment,
                            os.getcwd())
            self.recorder.refused_output(experiment, verdict.refused)
            self._end(store, stored, verdict.status, verdict.message, verdict.results)
            self.recorder.summary.add(verdict.status)
            return ""
        self._end(store, stored, "interrupted", f"dlbs stopped while submitting this "
                                               f"attempt's job; {target.display_name} does "
                                               "not know it")
        return ""


def _refuse_a_live_owner(path: str, open_attempts: Sequence[Any]) -> None:
    """ResultsError when an open attempt belongs to a run that still runs on this host."""
    for stored in open_attempts:
        mark = marks.decode(str(stored.job_id))
        if mark is not None and marks.owned_by_a_live_run(mark):
            pid = str(mark["owner"]).partition(":")[0]
            raise ResultsError(
                f"results database {path}: experiment {stored.exp_id}, attempt "
                f"{stored.attempt} belongs to a dlbs run that still runs (pid {pid}): "
                "another run uses this database under another name",
                hint="wait for it to end, or give this run a database of its own "
                     "(runtime.results_db)")


def reattach_invocation(experiment: Experiment) -> Invocation:
    """The invocation of a re-attached experiment (for its label); a bare one if it fails."""
    try:
        return invocation_for(experiment)
    except Exception:  # noqa: BLE001 - an old plan's experiment may no longer build
        return Invocation(argv=[], label=str(experiment.get("exp.id")))


def _epoch(text: str | None) -> float:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return time.time()
