"""What a recipe hands to an execution target: everything needed to run one experiment.

An `Invocation` is complete and resolved once: the command (launcher prefix included), the
merged environment, the GPUs, the mounts, the working directory, which target runs it, and
that target's request (a `ContainerSpec` for a container, a `BatchRequest` for a scheduler).
Targets read nothing else: no target looks at an experiment's raw parameters. Nothing here
is ever a shell string: argv is a list of tokens from start to finish.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dlbs.errors import LaunchError
from dlbs.recipes.docker_args import DockerArgs
from dlbs.recipes.parts import Mount as Mount
from dlbs.recipes.parts import experiment_label as experiment_label
from dlbs.recipes.parts import tokens as tokens

#: The execution targets a recipe can choose (`dlbs list targets` shows them).
LOCAL, DOCKER, SLURM = "local", "docker", "slurm"
#: The container engines (`exp.container_engine`): both are driven through the Docker API.
DOCKER_ENGINE, PODMAN_ENGINE = "docker", "podman"


@dataclass
class ContainerSpec:
    """The container an invocation runs in, with the user's `docker run` flags parsed once.

    `args` holds the translation of the framework's docker args (`<framework>.docker_args`,
    which include `exp.docker_args`): the SDK's keyword arguments, the flags that have no
    effect here, and the tokens as the user wrote them (a CLI rendering repeats those).
    `name` is the container's name: the user's `--name`, else a fresh unique one.
    `labels` are dlbs's own (`dlbs.exp_id`), added to the user's. `engine` is the engine that
    runs it (`docker`, or `podman` through its Docker-compatible API at `engine_url`; an
    empty `engine_url` means the Docker SDK's own settings, DOCKER_HOST and friends).
    """

    image: str
    args: DockerArgs
    name: str
    launcher: str = "docker"
    labels: dict[str, str] = field(default_factory=dict)
    engine: str = DOCKER_ENGINE
    engine_url: str = ""

    @property
    def uses_nvidia_runtime(self) -> bool:
        """Whether GPUs reach the container through `--runtime=nvidia` (not device requests)."""
        return self.args.kwargs.get("runtime") == "nvidia"

    @property
    def user_named(self) -> bool:
        """Whether the user's flags gave the container its name (`--name`)."""
        return "name" in self.args.kwargs


@dataclass
class BatchRequest:
    """What a batch scheduler is asked for (the `#SBATCH` lines of a SLURM job).

    Experiments whose requests are equal (`shape()`) can share one job array. `prologue`
    holds shell lines the job runs before the benchmark (`slurm.prologue`): the one place
    where a user's text reaches a shell. Zero and empty values are not requested.
    `queue_timeout` is not asked of the scheduler: the seconds dlbs lets the job wait in the
    queue before it cancels it (0: no limit); it is not part of the shape either.
    """

    nodes: int = 1
    ntasks_per_node: int = 1
    partition: str = ""
    account: str = ""
    time: str = ""
    gpus_per_node: int = 0
    extra_args: list[str] = field(default_factory=list)
    cpus_per_task: int = 0
    mem: str = ""
    gres: str = ""
    qos: str = ""
    exclusive: bool = False
    prologue: list[str] = field(default_factory=list)
    queue_timeout: float = 0.0

    def shape(self) -> tuple[Any, ...]:
        """Everything the request says, hashable: equal shapes can share one job array."""
        return tuple(tuple(value) if isinstance(value, list) else value
                     for value in (self.nodes, self.ntasks_per_node, self.partition,
                                   self.account, self.time, self.gpus_per_node,
                                   self.extra_args, self.cpus_per_task, self.mem, self.gres,
                                   self.qos, self.exclusive, self.prologue))


@dataclass
class Invocation:
    """One experiment's benchmark command, produced by its framework's recipe.

    `argv` is what runs (the `runtime.launcher` prefix first); inside a container it runs
    inside the image. `env` is the complete environment the benchmark gets on top of the
    target's own (runtime.env.* and the recipe's). `gpus` are host GPU ids (empty: CPU);
    targets turn them into `CUDA_VISIBLE_DEVICES` or container device requests. `nodes` and
    `tasks_per_node` say how many copies a scheduler starts. `target` names the execution
    target; `container` and `batch` are its requests (None when it needs none).
    `monitor_frequency` is the resource monitor's period in seconds (0: off);
    `monitor_energy` says to read the energy counters at the backend's marks even then.
    """

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    workdir: str | None = None
    gpus: list[str] = field(default_factory=list)
    nodes: int = 1
    tasks_per_node: int = 1
    target: str = LOCAL
    container: ContainerSpec | None = None
    batch: BatchRequest | None = None
    #: The experiment's id (or, failing that, its log file): for messages and labels.
    label: str = "<experiment>"
    #: The experiment's first log (`exp.log_file`); a target is told each attempt's own.
    log_file: str = ""
    monitor_frequency: float = 0.0
    monitor_energy: bool = False


def render_env_value(value: object) -> str:
    """An environment value as text: booleans as `true`/`false`, never Python's `True`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def experiment_env(experiment: Mapping[str, Any]) -> dict[str, str]:
    """The `runtime.env.NAME` parameters of an experiment as an environment dictionary."""
    prefix = "runtime.env."
    env: dict[str, str] = {}
    for key, value in experiment.items():
        if key.startswith(prefix) and len(key) > len(prefix):
            env[key[len(prefix):]] = render_env_value(value)
    return env


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


def positive_int(experiment: Mapping[str, Any], name: str, default: int) -> int:
    """A count parameter (`exp.num_nodes`, `slurm.nodes`): `default` when unset or empty."""
    value = experiment.get(name)
    if value in (None, ""):
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1 or isinstance(value, bool):
        raise LaunchError(f"{name}: expected a positive integer, got {value!r} "
                          f"(experiment {experiment_label(experiment)})")
    return number
