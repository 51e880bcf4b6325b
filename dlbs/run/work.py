"""What a worker thread does for one local or container attempt: run it, with the monitor.

While it runs, the backend's progress notes are read from its log (`dlbs.run.follow`) and
reported as `ProgressNote`s, beside its process's mark.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from dlbs.errors import LaunchError
from dlbs.run import marks
from dlbs.run.follow import LogFollower
from dlbs.run.job_results import on_attempt_clock
from dlbs.run.logs import append_to_log
from dlbs.run.outcome import Outcome
from dlbs.run.recording import Attempt, Job
from dlbs.run.targets import ProcessTarget

#: What the work returns: the outcome, the monitor's series and its warnings.
WorkResult = tuple[Outcome, dict[str, Any], list[str]]


def attempt_work(attempt: Attempt, stop: threading.Event
                 ) -> Callable[[Callable[[Any], None]], WorkResult]:
    """The work of a `ProcessPool` worker for the attempt (`report` gets its mark's root)."""
    job = attempt.job

    def work(report: Callable[[Any], None]) -> WorkResult:
        monitor = _monitor(job, attempt.log_path)
        target = job.target
        assert isinstance(target, ProcessTarget)

        def started(pid: int) -> None:
            if monitor is not None:
                monitor.start(pid)
            if attempt.mark is not None:  # the loop's thread records it
                report(marks.with_process(attempt.mark, pid))

        try:
            with append_to_log(attempt.log_path) as log, \
                    LogFollower(attempt.log_path, report):
                outcome = target.run(job.invocation, log, job_timeout(job), on_start=started,
                                     stop=stop,
                                     token=attempt.mark["token"] if attempt.mark else None)
        except LaunchError as error:
            outcome = Outcome("failure", f"could not start: {error.message}")
        except OSError as error:
            outcome = Outcome("failure", f"could not start: cannot write its log "
                                         f"{attempt.log_path}: {error.strerror or error}")
        finally:
            usage = monitor.stop() if monitor else {}
        if monitor is not None and monitor.started_epoch:
            usage = on_attempt_clock(usage, monitor.started_epoch - attempt.started_epoch)
        return outcome, usage, list(monitor.warnings) if monitor else []

    return work


def job_timeout(job: Job) -> float | None:
    """`exp.timeout` in seconds; None for no limit."""
    try:
        return float(job.experiment.get("exp.timeout") or 0) or None
    except (TypeError, ValueError):
        return None


def queue_timeout(job: Job) -> float | None:
    """The seconds a scheduler's job may wait in its queue (its request's); None: no limit."""
    batch = job.invocation.batch
    return batch.queue_timeout if batch is not None and batch.queue_timeout > 0 else None


def _monitor(job: Job, log_path: str) -> Any:
    """The resource monitor of an attempt the target runs here, or None.

    It samples every `monitor.frequency` seconds; at 0, with `monitor.energy` (the default),
    it only reads the energy counters at the backend's marks. Either way it follows the
    attempt's log for the marks of the timed interval.
    """
    frequency = job.invocation.monitor_frequency
    if not isinstance(job.target, ProcessTarget):
        return None
    if frequency <= 0 and not job.invocation.monitor_energy:
        return None
    from dlbs.monitor import ResourceMonitor

    return ResourceMonitor(max(frequency, 0.0), job.invocation.gpus, log=log_path)
