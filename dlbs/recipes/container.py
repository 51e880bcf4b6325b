"""One container request, rendered two ways: for the Docker SDK, and as a `docker run` line.

Both renderings come from the same `Invocation` and its `ContainerSpec`, so what the docker
target asks the Engine for and what a SLURM job script types are the same request. The
user's flags come first, dlbs's own after them (dlbs's environment wins, as in the SDK):
- the environment: the invocation's (runtime.env.* and the recipe's), and for GPUs
  `CUDA_VISIBLE_DEVICES` renumbered from 0, since the container sees only the selected
  GPUs (plus `NVIDIA_VISIBLE_DEVICES` with `--runtime=nvidia`);
- GPUs: a device request for the `nvidia` driver naming exactly the selected host ids, unless
  the user chose `--runtime=nvidia`, which selects them through the environment; on Podman,
  a CDI device request (`nvidia.com/gpu=<id>` each), the only GPU request its
  Docker-compatible API honours (from Podman 5.4);
- the invocation's mounts, its working directory (unless the user set `-w`), a `dlbs.exp_id`
  label, and a unique name (unless the user set `--name`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlbs.recipes.invocation import PODMAN_ENGINE, ContainerSpec, Invocation

#: The CDI kind of NVIDIA GPUs (nvidia-ctk cdi generate): `nvidia.com/gpu=0`.
CDI_GPU_KIND = "nvidia.com/gpu"


def cdi_gpus(invocation: Invocation) -> list[str]:
    """The invocation's GPUs as fully qualified CDI device names."""
    return [f"{CDI_GPU_KIND}={gpu}" for gpu in invocation.gpus]


def container_of(invocation: Invocation) -> ContainerSpec:
    """The invocation's container; a programming error if it has none."""
    if invocation.container is None:
        raise ValueError(f"invocation of {invocation.label} has no container")
    return invocation.container


def container_env(invocation: Invocation) -> dict[str, str]:
    """The environment dlbs gives the container (on top of the user's `-e` flags)."""
    spec = container_of(invocation)
    env = dict(invocation.env)
    if invocation.gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(invocation.gpus)))
        if spec.uses_nvidia_runtime:
            env["NVIDIA_VISIBLE_DEVICES"] = ",".join(invocation.gpus)
    return env


def sdk_request(invocation: Invocation) -> dict[str, Any]:
    """The request as plain data: image, command, the SDK's keyword arguments, ignored flags.

    `kwargs` is what `docker.client.containers.create` takes, with ulimits, device requests
    and mounts as dictionaries (the docker target makes SDK objects of those few).
    """
    spec = container_of(invocation)
    kwargs = {key: (dict(value) if isinstance(value, dict) else
                    list(value) if isinstance(value, list) else value)
              for key, value in spec.args.kwargs.items()}
    kwargs["environment"] = {**kwargs.get("environment", {}), **container_env(invocation)}
    if invocation.gpus and spec.engine == PODMAN_ENGINE:
        kwargs["device_requests"] = [{"Driver": "cdi", "DeviceIDs": cdi_gpus(invocation),
                                      "Capabilities": [["gpu"]]}]
    elif invocation.gpus and not spec.uses_nvidia_runtime:
        kwargs["device_requests"] = [{"Driver": "nvidia", "DeviceIDs": list(invocation.gpus),
                                      "Capabilities": [["gpu"]]}]
    mounts = [{"Target": m.container, "Source": m.host, "Type": "bind",
               "ReadOnly": m.read_only} for m in invocation.mounts]
    if mounts:
        kwargs["mounts"] = kwargs.get("mounts", []) + mounts
    if invocation.workdir:
        kwargs.setdefault("working_dir", invocation.workdir)
    kwargs["labels"] = {**kwargs.get("labels", {}), **spec.labels}
    kwargs.setdefault("name", spec.name)
    return {"image": spec.image, "command": list(invocation.argv), "kwargs": kwargs,
            "ignored": list(spec.args.ignored)}


def cli_argv(invocation: Invocation, *, named: bool = True,
             pass_env: Sequence[str] = ()) -> list[str]:
    """The equivalent `docker run` (`nvidia-docker run`, `podman run`) command line, as tokens.

    `named=False` leaves out dlbs's container name (a SLURM job starts one container per
    task, which must not collide). `pass_env` names variables of the calling process passed
    into the container as they are (`-e NAME`): a task's rank and the rendezvous.
    """
    spec = container_of(invocation)
    user = spec.args
    argv = [PODMAN_ENGINE if spec.engine == PODMAN_ENGINE else spec.launcher, "run"]
    if "--rm" not in user.tokens:
        argv.append("--rm")
    if named and not spec.user_named:
        argv += ["--name", spec.name]
    for label, value in spec.labels.items():
        argv += ["--label", f"{label}={value}"]
    argv += user.tokens
    for mount in invocation.mounts:
        if ":" in mount.host + mount.container:
            argv += ["--mount", f"type=bind,source={mount.host},target={mount.container}"
                     + (",readonly" if mount.read_only else "")]
        else:
            argv += ["-v", f"{mount.host}:{mount.container}"
                     + (":ro" if mount.read_only else "")]
    for name, value in container_env(invocation).items():
        argv += ["-e", f"{name}={value}"]
    for name in pass_env:
        argv += ["-e", name]
    if invocation.workdir and "working_dir" not in user.kwargs:
        argv += ["-w", invocation.workdir]
    if spec.engine == PODMAN_ENGINE:
        for device in cdi_gpus(invocation):
            argv += ["--device", device]
    elif spec.launcher == "docker" and invocation.gpus and not spec.uses_nvidia_runtime:
        # The docker CLI reads --gpus as CSV: the quotes keep the ids one field.
        argv += ["--gpus", '"device=' + ",".join(invocation.gpus) + '"']
    return [*argv, spec.image, *invocation.argv]
