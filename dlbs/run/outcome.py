"""What an execution target hands back after running an invocation: an `Outcome`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The statuses a target reports. The run loop adds `skipped` for what it never started.
OK = "ok"
FAILURE = "failure"
TIMEOUT = "timeout"
INTERRUPTED = "interrupted"
CANCELLED = "cancelled"
STATUSES = (OK, FAILURE, TIMEOUT, INTERRUPTED, CANCELLED)


@dataclass
class Outcome:
    """How one run of an invocation ended.

    `status` is one of `STATUSES`; `message` says why for anything but ok (a signal name,
    SLURM's reason, the timeout); `returncode` is the process's (or container's, or job's)
    exit status when there was one; `details` holds target-specific facts (container id,
    SLURM job id, state, nodes).
    """

    status: str
    message: str = ""
    returncode: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown outcome status {self.status!r}; expected one of {STATUSES}")
