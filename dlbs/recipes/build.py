"""A resolved experiment -> its complete `Invocation`, built once, before anything runs.

The framework's recipe gives the backend's command, environment and mounts; this module adds
what every framework shares: the launcher prefix (`runtime.launcher`), `runtime.env.*`, the
GPUs, the container request (`exp.docker_image`, `exp.docker_launcher`, the docker args
parsed once), and the execution target with its scheduler's request (`exp.scheduler`,
`exp.docker`, `slurm.*`: `dlbs.recipes.schedulers`). Every parameter a target needs is
read here, and every mistake in one raises `LaunchError` naming the parameter and the
experiment, before the sweep starts.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from dlbs.errors import LaunchError
from dlbs.recipes import evaluation, tracing
from dlbs.recipes.docker_args import translate
from dlbs.recipes.invocation import (
    DOCKER_ENGINE,
    PODMAN_ENGINE,
    ContainerSpec,
    Invocation,
    Mount,
    experiment_env,
    experiment_label,
    positive_int,
    requested_gpus,
    tokens,
)
from dlbs.recipes.recipe import recipe_for
from dlbs.recipes.schedulers import scheduler_request, target_name
from dlbs.util.booleans import truthy

Experiment = Mapping[str, Any]


def invocation_for(experiment: Experiment) -> Invocation:
    """The complete invocation of one experiment; see the module doc."""
    recipe = recipe_for(experiment)
    in_container = recipe.in_container(experiment)
    env = recipe.environment(experiment)
    mounts = recipe.mounts(experiment)
    if in_container:  # the backends' shared package, evaluation inputs and outputs
        mounts = [*mounts, *evaluation.container_mounts(experiment, recipe.name)]
        mounts += tracing.trace_mounts(experiment, mounts)  # the trace, at its host path
    else:
        env.update(evaluation.common_env(experiment, recipe.backend_dir(experiment), env))
    invocation = assemble(experiment, recipe.command(experiment), env=env, mounts=mounts,
                          docker_args=recipe.docker_arg_tokens(experiment)
                          if in_container else None)
    if in_container and invocation.workdir is None:
        invocation.workdir = evaluation.container_workdir(invocation.mounts)
    return invocation


def assemble(experiment: Experiment, command: list[str], *, env: Mapping[str, str] | None = None,
             mounts: Sequence[Mount] = (), docker_args: list[str] | None = None) -> Invocation:
    """An invocation of `command` with everything the experiment's target needs.

    `env` and `mounts` are the recipe's; `docker_args` the container's flags as tokens
    (None: `exp.docker_args`). The launcher prefix, runtime.env.*, the GPUs, the target and
    its request come from the experiment.
    """
    label = experiment_label(experiment)
    target = target_name(experiment)
    merged_env = experiment_env(experiment)
    merged_env.update(env or {})
    invocation = Invocation(
        argv=launcher_prefix(experiment) + list(command), env=merged_env, mounts=list(mounts),
        gpus=requested_gpus(experiment), nodes=positive_int(experiment, "exp.num_nodes", 1),
        target=target, label=label, log_file=str(experiment.get("exp.log_file") or ""),
        monitor_frequency=_monitor_frequency(experiment),
        monitor_energy=truthy(experiment.get("monitor.energy", True)))
    if truthy(experiment.get("exp.docker", False)):
        if docker_args is None:
            docker_args = tokens(experiment.get("exp.docker_args"), "exp.docker_args")
        invocation.container = container_spec(experiment, invocation, docker_args)
    invocation.batch = scheduler_request(experiment, invocation)
    return invocation


def launcher_prefix(experiment: Experiment) -> list[str]:
    """The `runtime.launcher` tokens (numactl, taskset, ...) put before the command."""
    return tokens(experiment.get("runtime.launcher"), "runtime.launcher")


def container_spec(experiment: Experiment, invocation: Invocation,
                   docker_args: list[str]) -> ContainerSpec:
    """The container request: image, launcher, the docker args translated once."""
    label = invocation.label
    image = str(experiment.get("exp.docker_image") or "")
    if not image:
        raise LaunchError(f"exp.docker_image is empty (experiment {label})",
                          hint="set exp.docker_image, or exp.docker: false for bare metal")
    # The configs declare both parameters' choices: the planner (and a plan file's reader)
    # has checked them.
    launcher = str(experiment.get("exp.docker_launcher") or "docker")
    engine = str(experiment.get("exp.container_engine") or DOCKER_ENGINE)
    if engine == PODMAN_ENGINE and launcher == "nvidia-docker":
        raise LaunchError(f"experiment {label}: exp.container_engine is podman, but "
                          "exp.docker_launcher is nvidia-docker (a Docker-only binary)",
                          hint="set exp.docker_launcher: docker; Podman gets GPUs through CDI")
    args = translate(docker_args, f"the docker args of experiment {label}")
    if invocation.gpus and "device_requests" in args.kwargs:
        raise LaunchError(f"the docker args of experiment {label}: --gpus conflicts with "
                          "exp.gpus", hint="remove --gpus: dlbs requests exactly the GPUs "
                                           "of exp.gpus")
    engine_url = ""
    if engine == PODMAN_ENGINE:
        engine_url = podman_socket(experiment)
        if args.kwargs.get("ipc_mode") == "host" and "shm_size" in args.kwargs:
            # The host's /dev/shm is shared whole: Docker ignores the size, Podman refuses it.
            del args.kwargs["shm_size"]
            args.ignored.append("--shm-size: no effect with --ipc=host (the host's /dev/shm "
                                "is shared; Podman refuses the pair)")
    return ContainerSpec(image=image, args=args, name=_container_name(label),
                         launcher=launcher,
                         labels={"dlbs.exp_id": str(experiment.get("exp.id") or "")},
                         engine=engine, engine_url=engine_url)


def podman_socket(experiment: Experiment) -> str:
    """The URL of Podman's Docker-compatible API (`runtime.podman_socket`, else the default).

    The default is where `podman system service` listens: $CONTAINER_HOST when set, else
    /run/podman/podman.sock for root and $XDG_RUNTIME_DIR/podman/podman.sock for others.
    """
    given = str(experiment.get("runtime.podman_socket") or "")
    if not given:
        given = os.environ.get("CONTAINER_HOST", "")
    if not given:
        runtime_dir = "/run" if os.geteuid() == 0 else os.environ.get(
            "XDG_RUNTIME_DIR", f"/run/user/{os.geteuid()}")
        given = f"{runtime_dir}/podman/podman.sock"
    return given if "://" in given else f"unix://{given}"


def _container_name(label: str) -> str:
    stem = "".join(c if c.isalnum() or c in "_.-" else "-" for c in label)[:40]
    return f"dlbs-{stem}-{uuid.uuid4().hex[:8]}"


def _monitor_frequency(experiment: Experiment) -> float:
    # The configs declare it a float in [0, 86400]: the planner (and a plan file's reader)
    # has checked it.
    return float(experiment.get("monitor.frequency") or 0)
