"""The mark of a running attempt: what a later `dlbs run` needs to stop it after dlbs died.

Before a local or container experiment starts, the run loop gives its attempt a mark: the
target that runs it, a token unique to the attempt, this host and its boot, and the run
that owns it (`owner`: this dlbs process, `orphans.owner_identity`). The target tags what
it starts with the token and the owner (a local process tree's environment `DLBS_ATTEMPT`
and `DLBS_RUN`, a container's labels `dlbs.attempt` and `dlbs.run`); once the benchmark
runs, its process tree's root (pid and start time) is added, for messages: only what
carries the token is ever stopped, and never what a run that still runs owns. The mark is
recorded in the attempt's `job_id` as `run:` + JSON (the column otherwise holds a scheduler's
job id), before the benchmark starts: a `dlbs run` killed at any moment leaves an open
attempt whose mark tells the next run what to stop (`ProcessTarget.stop_leftovers`).

A scheduler's attempt has no mark: its job id column holds `pending:<name>:<index>` from just
before the submission until the scheduler's answer is recorded, so that a loop killed in
between finds the job by its name (`SchedulerTarget.find_submitted`); then `<job id> <name>`.
The submission's name is `dlbs-<experiment>-<token>` (`dlbs-array-<token>` for a job array),
the token unique to the submission: a later run re-attaches to the job, and may cancel it,
only when the scheduler's job has that name, is this user's and runs that experiment
(`SchedulerTarget.adoption`), never because a row of the store names a job id.
"""

from __future__ import annotations

import json
import re
import socket
import uuid
from collections.abc import Mapping
from typing import Any

from dlbs.run.targets.orphans import boot_id, owner_identity, owner_lives, start_ticks

PREFIX = "run:"
PENDING_PREFIX = "pending:"
#: The environment variable that carries a local attempt's token to its whole process tree.
TOKEN_VARIABLE = "DLBS_ATTEMPT"
#: The label that carries a container attempt's token.
TOKEN_LABEL = "dlbs.attempt"
#: The environment variable and the label that carry the run that owns an attempt.
OWNER_VARIABLE = "DLBS_RUN"
OWNER_LABEL = "dlbs.run"


def new_mark(target: str) -> dict[str, Any]:
    """A fresh mark for an attempt that `target` is about to run."""
    return {"target": target, "token": uuid.uuid4().hex, "host": socket.gethostname(),
            "boot": boot_id(), "owner": owner_identity()}


def with_process(mark: Mapping[str, Any], pid: int) -> dict[str, Any]:
    """The mark, with the root of the started process tree (pid and start time)."""
    return {**mark, "pid": pid, "start": start_ticks(pid)}


def owned_by_a_live_run(mark: Mapping[str, Any]) -> bool:
    """Whether the run that recorded the mark runs on this host now (and is not this one).

    The mark's attempt ran where its `host` says; a mark of another host tells nothing here.
    """
    owner = mark.get("owner")
    return isinstance(owner, str) and mark.get("host") == socket.gethostname() and \
        owner_lives(owner, elsewhere=False)


def encode(mark: Mapping[str, Any]) -> str:
    """The mark as the text recorded in the attempt's job id."""
    return PREFIX + json.dumps(dict(mark), sort_keys=True, separators=(",", ":"))


def is_mark(job_id: str | None) -> bool:
    """Whether an attempt's job id is a mark (not a SLURM job id)."""
    return bool(job_id) and str(job_id).startswith(PREFIX)


def decode(job_id: str) -> dict[str, Any] | None:
    """The mark in a job id; None when it is not one, or not readable."""
    if not is_mark(job_id):
        return None
    try:
        mark = json.loads(job_id[len(PREFIX):])
    except ValueError:
        return None
    if not isinstance(mark, dict) or not isinstance(mark.get("target"), str) or \
            not isinstance(mark.get("token"), str):
        return None
    return mark



def pending(name: str, index: int | None) -> str:
    """The job id column of an attempt about to be submitted as entry `index` of `name`."""
    return f"{PENDING_PREFIX}{name}:{'' if index is None else index}"


def is_pending(job_id: str | None) -> bool:
    """Whether an attempt's job id is a pending submission's name (not a job id yet)."""
    return bool(job_id) and str(job_id).startswith(PENDING_PREFIX)


def decode_pending(job_id: str) -> tuple[str, int | None]:
    """The submission's name and the attempt's entry in it (None: the only one)."""
    name, _, index = job_id[len(PENDING_PREFIX):].partition(":")
    return name, int(index) if index.isdigit() else None


#: The name of a submission of several experiments (a job array).
ARRAY = "array"
_TOKEN = re.compile(r"^[0-9a-f]{8}$")


def name_part(label: str) -> str:
    """An experiment's label as a part of a job's name: safe characters, at most 40."""
    return "".join(c if c.isalnum() or c in "_.-" else "-" for c in label)[:40]


def submission_name(label: str | None) -> str:
    """A fresh name for a submission of experiment `label` (None: of several, an array)."""
    part = ARRAY if label is None else name_part(label)
    return f"dlbs-{part}-{uuid.uuid4().hex[:8]}"


def name_mismatch(name: str | None, exp_id: str, array: bool | None = None) -> str | None:
    """Why `name` is not a submission name of experiment `exp_id` (None: it is one).

    `array`: whether the submission was a job array's (None: either).
    """
    if not name:
        return ("the attempt recorded no submission name with its job id (a dlbs before "
                "2026-11 recorded none; or not dlbs)")
    parts = [ARRAY] if array else [name_part(str(exp_id))] if array is False else \
        [ARRAY, name_part(str(exp_id))]
    for part in parts:
        prefix = f"dlbs-{part}-"
        if name.startswith(prefix) and _TOKEN.match(name[len(prefix):]):
            return None
    return (f"{name[:120]!r} is not the name of a submission of experiment {exp_id} "
            f"(dlbs names it dlbs-{parts[-1]}-<token>)")


def submitted(job_id: str, name: str) -> str:
    """The job id column of an attempt whose submission `name` the scheduler took as `job_id`."""
    return f"{job_id} {name}"


def decode_submitted(text: str) -> tuple[str, str | None]:
    """(job id, submission name) of the column; no name in an older record."""
    job_id, _, name = text.strip().partition(" ")
    return job_id, name.strip() or None

