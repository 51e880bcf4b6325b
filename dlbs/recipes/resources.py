"""What an experiment needs from the machine it runs on: its input files and its GPUs.

`dlbs validate` reports what is missing as problems, and `dlbs run` fails such an experiment
before it starts, naming the dlbs parameter (not a backend flag), instead of letting the
backend fail later (docs/running.md, "Checking a plan"). The checks hold where the
experiment runs:
- on this host (`exp.scheduler` none): bare metal reads the paths here; a container gets
  them mounted from here, and its GPUs are this host's (the Engine's device requests);
- not checked under a scheduler (SLURM: a compute node's files and GPUs), nor in a
  container of an engine on another machine (`DOCKER_HOST`, `runtime.podman_socket` not a
  local socket): `elsewhere()` says where, for the user to be told.

The GPUs of this host are found by the caller (`HostGpus`, from nvidia-smi); this module
only compares. The dummy backend simulates devices (`Recipe.simulates_devices`): its GPU
experiments run on bare metal anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlbs.errors import DlbsError
from dlbs.recipes.build import podman_socket
from dlbs.recipes.invocation import PODMAN_ENGINE, requested_gpus
from dlbs.recipes.recipe import recipe_for
from dlbs.recipes.schedulers import NO_SCHEDULER
from dlbs.util.booleans import truthy

Experiment = Mapping[str, Any]
#: Engine addresses on this host (a socket's URL or path): a container's mounts and GPUs
#: are then this host's.
LOCAL_ENGINE_ADDRESSES = ("unix://", "npipe://", "/")


@dataclass(frozen=True)
class HostGpus:
    """The GPUs of this host as nvidia-smi lists them (`ids` None: cannot say), and how."""

    ids: tuple[str, ...] | None
    source: str

    @classmethod
    def listed(cls, ids: list[str] | None) -> HostGpus:
        if ids is None:
            return cls((), "nvidia-smi is not installed")
        return cls(tuple(ids), f"nvidia-smi lists {', '.join(ids)}" if ids else
                   "nvidia-smi lists none")

    @classmethod
    def unknown(cls, reason: str) -> HostGpus:
        return cls(None, reason)


@dataclass(frozen=True)
class Missing:
    """One thing an experiment needs that is not there: the parameter, what, what to do."""

    parameter: str
    message: str
    hint: str

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})"


def elsewhere(experiment: Experiment) -> str | None:
    """Where the experiment runs when that is not this host (its inputs are not checked)."""
    scheduler = str(experiment.get("exp.scheduler") or NO_SCHEDULER)
    if scheduler != NO_SCHEDULER:
        return "under SLURM, on a compute node" if scheduler == "slurm" else \
            f"under the scheduler {scheduler}"
    if truthy(experiment.get("exp.docker", False)):
        if str(experiment.get("exp.container_engine") or "docker") == PODMAN_ENGINE:
            url = podman_socket(experiment)
        else:
            url = os.environ.get("DOCKER_HOST", "")
        if url and not url.startswith(LOCAL_ENGINE_ADDRESSES):
            return f"in a container of the engine at {url}"
    return None


def missing_resources(experiment: Experiment, gpus: HostGpus) -> list[Missing]:
    """What the experiment needs from this host that it lacks ([] when it runs elsewhere)."""
    if elsewhere(experiment) is not None:
        return []
    in_container = truthy(experiment.get("exp.docker", False))
    found = [m for m in (_missing_path(experiment, name, kind, in_container)
                         for name, kind in _inputs(experiment)) if m is not None]
    if not any(m.parameter == "exp.data_dir" for m in found):
        data = _unreadable_data(experiment)
        found += [data] if data is not None else []
    gpu = _missing_gpus(experiment, gpus, in_container)
    return found + ([gpu] if gpu is not None else [])


def _unreadable_data(experiment: Experiment) -> Missing | None:
    """The dataset is there, but in a format the backend will not read as asked."""
    value = experiment.get("exp.data_dir")
    if not isinstance(value, str) or not value:
        return None
    try:
        problem = recipe_for(experiment).data_problem(experiment, os.path.abspath(value))
    except DlbsError:  # no recipe: the run says so when it builds the command
        return None
    return Missing(*problem) if problem is not None else None


def _inputs(experiment: Experiment) -> list[tuple[str, str]]:
    """(parameter, "file" or "path") of every input the experiment reads from the host."""
    framework = str(experiment.get("exp.framework") or "")
    return [("exp.data_dir", "path"), ("exp.weights", "file"), ("exp.labels", "file"),
            (f"{framework}.extra_models", "file"), (f"{framework}.model_file", "file")]


def _missing_path(experiment: Experiment, name: str, kind: str,
                  in_container: bool) -> Missing | None:
    value = experiment.get(name)
    if not isinstance(value, str) or not value:
        return None
    path = os.path.abspath(value)
    if os.path.isfile(path) if kind == "file" else os.path.exists(path):
        return None
    what = "is not a file" if kind == "file" and os.path.exists(path) else "does not exist"
    shown = repr(value) if value == path else f"{value!r} ({path})"
    where = "on this host, which mounts it into the container" if in_container else \
        "on this host"
    return Missing(name, f"{name} {shown} {what} {where}", _PATH_HINTS.get(
        name, f"set {name} to an existing file, or empty"))


_PATH_HINTS = {
    "exp.data_dir": "set exp.data_dir to the dataset, or empty for synthetic data",
    "exp.weights": "set exp.weights to the weights file, or empty for random weights",
    "exp.labels": "set exp.labels to the class-name file, or empty",
}


def _missing_gpus(experiment: Experiment, gpus: HostGpus, in_container: bool) -> Missing | None:
    wanted = requested_gpus(experiment)
    if not wanted or gpus.ids is None:
        return None
    if not in_container:
        try:
            if recipe_for(experiment).simulates_devices:
                return None
        except DlbsError:  # no recipe: the run says so when it builds the command
            return None
    absent = [gpu for gpu in wanted if gpu not in gpus.ids]
    if not absent:
        return None
    shown = str(experiment.get("exp.gpus"))
    has = (f"{len(gpus.ids)} GPU{'s' if len(gpus.ids) != 1 else ''}" if gpus.ids else
           "no NVIDIA GPU")
    return Missing("exp.gpus", f"exp.gpus {shown!r} asks for GPU {', '.join(absent)}, but "
                               f"this host has {has} ({gpus.source})",
                   "set exp.gpus to GPUs this host has, or to \"\" to run on the CPU")
