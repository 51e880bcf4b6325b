"""What `dlbs run` does with each experiment of the plan, before anything runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlbs.results.store import STARTED

RUN = "run"
SKIP = "skip"          # recorded as skipped, with the reason
IGNORE = "ignore"      # not run and not recorded (disabled, already done)
SIMULATE = "simulate"  # print the request, run nothing
FAIL = "fail"          # recorded as a failure, with the reason, without running (an input
                       # or a GPU it needs is not on this host: dlbs/run/host_check.py)


#: Stored statuses of attempts that failed: an experiment whose newest attempt ended so and is
#: not run again makes the run fail too (it measured nothing).
FAILED = ("failure", "timeout", "cancelled")


@dataclass(frozen=True)
class Decision:
    action: str
    reason: str = ""
    #: The stored status that keeps the experiment from running again ("": none does).
    recorded: str = ""

    @property
    def failed_earlier(self) -> bool:
        """Not run again, and the newest attempt an earlier run recorded failed."""
        return self.action == IGNORE and self.recorded in FAILED


def decide(experiment: Mapping[str, Any], latest_status: str | None,
           oom_limit: int | None) -> Decision:
    """The action for one experiment.

    `latest_status` is the newest stored attempt's status (None: never recorded; "started":
    an attempt that dlbs itself did not see end, which is always run again). `oom_limit` is
    the smallest replica batch of the same kind known to run out of memory.
    """
    status = str(experiment.get("exp.status") or "ok")
    if status in ("disabled", "inactive"):
        return Decision(IGNORE, f"exp.status is {status}")
    if status == "simulate":
        return Decision(SIMULATE)
    rerun = str(experiment.get("exp.rerun") or "never")
    if latest_status not in (None, STARTED, "interrupted", "skipped"):
        if rerun == "never":
            return Decision(IGNORE, f"already recorded ({latest_status}); exp.rerun is never",
                            latest_status)
        if rerun == "onfail" and latest_status == "ok":
            return Decision(IGNORE, "already recorded ok; exp.rerun is onfail", latest_status)
    if too_large(experiment, oom_limit):
        return Decision(SKIP, f"replica batch {experiment['exp.replica_batch']} >= {oom_limit}, "
                              f"which ran out of memory before (set exp.ignore_past_errors to "
                              f"try)")
    return Decision(RUN)


def too_large(experiment: Mapping[str, Any], oom_limit: int | None) -> bool:
    """The out-of-memory rule: skip a replica batch at or above `oom_limit`.

    `oom_limit` is the smallest replica batch of the experiment's kind (`oom_key`) known to
    run out of memory; `exp.ignore_past_errors` runs it anyway. The run loop applies it to
    every experiment before the sweep, again when its turn comes, and to the scheduler jobs
    still queued when one of their kind runs out of memory.
    """
    batch = experiment.get("exp.replica_batch")
    return oom_limit is not None and isinstance(batch, int) and batch >= oom_limit and \
        not experiment.get("exp.ignore_past_errors")


def oom_key(experiment: Mapping[str, Any]) -> tuple[str, str, str, str, str]:
    """What makes out-of-memory failures comparable: framework, device, model, dtype, phase."""
    return tuple(str(experiment.get(name) or "") for name in (  # type: ignore[return-value]
        "exp.framework", "exp.device_type", "exp.model", "exp.dtype", "exp.phase"))
