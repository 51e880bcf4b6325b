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
        return Decision(SKIP, f"{describe_size(experiment)} >= {oom_limit}, which ran out of "
                              f"memory before (set exp.ignore_past_errors to try)")
    return Decision(RUN)


def replica_size(experiment: Mapping[str, Any]) -> int | None:
    """What the out-of-memory rule compares: the replica batch, in tokens for a transformer.

    An experiment with `exp.seq_len` holds replica batch x sequence tokens a replica, which
    its activations grow with (attention's too, with FlashAttention's kernels): a batch sweep
    and a sequence sweep both find the largest that fits. None: no integral batch.
    """
    batch, seq_len = experiment.get("exp.replica_batch"), experiment.get("exp.seq_len")
    if not isinstance(batch, int) or isinstance(batch, bool):
        return None
    return batch * seq_len if isinstance(seq_len, int) and seq_len > 0 else batch


def describe_size(experiment: Mapping[str, Any]) -> str:
    """'replica batch 8', or 'replica batch 2 x 8192 tokens (16384)' for a transformer."""
    batch, size = experiment.get("exp.replica_batch"), replica_size(experiment)
    if size is not None and size != batch:
        return f"replica batch {batch} x {experiment.get('exp.seq_len')} tokens ({size})"
    return f"replica batch {batch}"


def too_large(experiment: Mapping[str, Any], oom_limit: int | None) -> bool:
    """The out-of-memory rule: skip a replica size at or above `oom_limit`.

    `oom_limit` is the smallest replica size (`replica_size`) of the experiment's kind
    (`oom_key`) known to run out of memory; `exp.ignore_past_errors` runs it anyway. The run
    loop applies it to every experiment before the sweep, again when its turn comes, and to
    the scheduler jobs still queued when one of their kind runs out of memory.
    """
    size = replica_size(experiment)
    return oom_limit is not None and size is not None and size >= oom_limit and \
        not experiment.get("exp.ignore_past_errors")


def oom_key(experiment: Mapping[str, Any]) -> tuple[str, str, str, str, str]:
    """What makes out-of-memory failures comparable: framework, device, model, dtype, phase.

    `exp.oom_class` (what else decides a replica's memory: a transformer's sharding over how
    many GPUs and its checkpointing) is part of the model's entry where it is set.
    """
    framework, device, model, dtype, phase = (str(experiment.get(name) or "") for name in (
        "exp.framework", "exp.device_type", "exp.model", "exp.dtype", "exp.phase"))
    oom_class = str(experiment.get("exp.oom_class") or "")
    return framework, device, f"{model} [{oom_class}]" if oom_class else model, dtype, phase
