"""The backend's tracing flags and the trace folder's mount (docs/tracing.md).

The recipe appends `--trace_level`, `--trace_batches` and `--trace_file` to the backend's
`<fw>.args` when `exp.trace_level` is not none (configs/03-trace.yaml says why these are not
in `<fw>.args`). The trace file is passed as an absolute path, and a container sees the
trace's folder at that same path, so the path the backend prints (`results.trace_file`) is
the host's, whatever the target: bare metal, a container, a SLURM job on a shared file system.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dlbs.errors import LaunchError
from dlbs.recipes.parts import Mount, experiment_label

LEVEL, BATCHES, FILE = "exp.trace_level", "exp.trace_batches", "exp.trace_file"
NO_TRACE = "none"
#: The backend flags the recipe renders from those parameters.
TRACE_FLAGS = ("--trace_level", "--trace_batches", "--trace_file")


def traces(experiment: Mapping[str, Any]) -> bool:
    """Whether the experiment asks for a trace."""
    return str(experiment.get(LEVEL) or NO_TRACE) != NO_TRACE


def trace_path(experiment: Mapping[str, Any]) -> str:
    """The trace's absolute path (`exp.trace_file`, relative to where dlbs runs)."""
    path = str(experiment.get(FILE) or "")
    if not path:
        raise LaunchError(f"experiment {experiment_label(experiment)}: exp.trace_level is "
                          f"{experiment.get(LEVEL)}, but exp.trace_file is empty",
                          hint="leave exp.trace_file at its default (beside the log)")
    return os.path.abspath(path)


def trace_flags(experiment: Mapping[str, Any]) -> list[str]:
    """The backend's tracing flags (none when the experiment does not trace)."""
    if not traces(experiment):
        return []
    values = (str(experiment[LEVEL]), str(experiment.get(BATCHES, 5)), trace_path(experiment))
    return [token for pair in zip(TRACE_FLAGS, values) for token in pair]


def untraced_note(recorded: Iterable[Mapping[str, Any]]) -> str | None:
    """What to say when experiments already recorded, and so not run again, ask for a trace.

    Tracing is not part of an experiment's id: adding exp.trace_level to one that ran keeps
    it recorded, and `exp.rerun` never (the default) would leave it untraced without a word.
    A trace file that is already there (traced before) needs nothing.
    """
    untraced = [e for e in recorded if traces(e) and not os.path.isfile(str(e.get(FILE) or ""))]
    if not untraced:
        return None
    first = untraced[0]
    many = len(untraced) > 1
    return (f"{len(untraced)} experiment{'s' if many else ''} with exp.trace_level "
            f"{first.get(LEVEL)} {'are' if many else 'is'} already recorded and not run again "
            f"(exp.rerun is {first.get('exp.rerun') or 'never'}), so not traced: a trace is "
            f"taken by a run; add -P exp.rerun=always to run {'them' if many else 'it'} again "
            f"with the trace (the id stays the same)")


def trace_mounts(experiment: Mapping[str, Any], mounted: Sequence[Mount] = ()) -> list[Mount]:
    """The trace's folder, shown to a container at the same path, unless `mounted` has it."""
    if not traces(experiment):
        return []
    folder = os.path.dirname(trace_path(experiment))
    if any(mount.container == folder and not mount.read_only for mount in mounted):
        return []
    return [Mount(host=folder, container=folder)]
