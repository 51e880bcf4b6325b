"""What a framework recipe hands to an execution target, and what the target hands back.

A recipe turns one resolved experiment into an `Invocation` (argv, environment, mounts); a
target (`dlbs.run.targets`) runs it on bare metal, in a container or as a SLURM job and
returns an `Outcome`. Neither ever builds a shell string out of parameters: argv is a list of
tokens from start to finish.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dlbs.errors import LaunchError

#: The statuses a target reports. The run loop adds `skipped` for what it never started.
OK = "ok"
FAILURE = "failure"
TIMEOUT = "timeout"
INTERRUPTED = "interrupted"
CANCELLED = "cancelled"
STATUSES = (OK, FAILURE, TIMEOUT, INTERRUPTED, CANCELLED)


@dataclass(frozen=True)
class Mount:
    """A host folder or file made visible inside a container at `container`."""

    host: str
    container: str
    read_only: bool = False


@dataclass
class Invocation:
    """One benchmark command, produced by a framework recipe from a resolved experiment.

    `argv` is a list of tokens that no shell ever evaluates. `gpus` are host GPU ids (empty:
    CPU); targets turn them into `CUDA_VISIBLE_DEVICES` or container device requests.
    `nodes` and `tasks_per_node` say how many copies a scheduler starts (one per task).
    """

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    workdir: str | None = None
    gpus: list[str] = field(default_factory=list)
    nodes: int = 1
    tasks_per_node: int = 1


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


def tokens(value: object, name: str) -> list[str]:
    """An argument-list parameter (`exp.docker_args`, `runtime.launcher`, ...) as tokens.

    Each item of a list is split as a POSIX shell splits words (quotes respected; nothing is
    evaluated), so `["--shm-size=1g --ipc=host", "-v '/a b:/data'"]` gives four tokens; a
    plain string is split the same way; None and "" give no tokens.
    """
    if value is None or value == "":
        return []
    items = value if isinstance(value, list | tuple) else [value]
    result: list[str] = []
    for item in items:
        if not isinstance(item, str):
            item = str(item)
        try:
            result.extend(shlex.split(item))
        except ValueError as error:
            raise LaunchError(f"{name}: cannot split {item!r} into arguments: {error}",
                              hint="close the quote, or escape it") from error
    return result


def experiment_env(experiment: Mapping[str, Any]) -> dict[str, str]:
    """The `runtime.env.NAME` parameters of an experiment as an environment dictionary."""
    prefix = "runtime.env."
    env: dict[str, str] = {}
    for key, value in experiment.items():
        if key.startswith(prefix) and len(key) > len(prefix):
            env[key[len(prefix):]] = render_env_value(value)
    return env


def render_env_value(value: object) -> str:
    """An environment value as text: booleans as `true`/`false`, never Python's `True`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def experiment_label(experiment: Mapping[str, Any]) -> str:
    """A short name of an experiment for messages: its id, else its log file."""
    return str(experiment.get("exp.id") or experiment.get("exp.log_file") or "<experiment>")


def requested_gpus(experiment: Mapping[str, Any]) -> list[str]:
    """The host GPU ids in `exp.gpus` (`"0,1"`, `"0:1,2:3"`, a list, or "" for CPU)."""
    value = experiment.get("exp.gpus", "")
    items = value if isinstance(value, list | tuple) else [value]
    ids: list[str] = []
    for item in items:
        for part in str(item).replace(":", ",").split(","):
            if part.strip():
                ids.append(part.strip())
    return ids
