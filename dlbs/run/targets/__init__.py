"""The execution targets and their registry.

A target runs one experiment's `Invocation` somewhere: `local` (a child process), `docker`
(the Docker Engine, through its SDK) or `slurm` (a batch job); the invocation names its
target (`Invocation.target`). The run loop knows two interfaces, `ProcessTarget` (`base.py`)
and `SchedulerTarget` (`scheduler.py`), and never a concrete target. Targets register
themselves with `@register_target(name)`; a target whose dependency is missing still
registers, with the reason, which is reported only when someone selects it.
"""

from __future__ import annotations

from dlbs.run.targets.base import (
    OpenTargets,
    ProcessTarget,
    Target,
    get_target,
    register_target,
    targets,
)
from dlbs.run.targets.scheduler import JobState, SchedulerTarget, SubmitLimit

__all__ = [
    "JobState",
    "OpenTargets",
    "ProcessTarget",
    "SchedulerTarget",
    "SubmitLimit",
    "Target",
    "get_target",
    "register_target",
    "targets",
]
