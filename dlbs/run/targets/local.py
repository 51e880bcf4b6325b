"""The `local` target: the benchmark as a child process on this machine (bare metal)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import Any, BinaryIO

from dlbs.errors import LaunchError
from dlbs.run.invocation import (
    Invocation,
    Outcome,
    experiment_env,
    experiment_label,
    tokens,
)
from dlbs.run.targets.base import Experiment, OnStart, ProcessTarget, register_target
from dlbs.run.targets.process import DEFAULT_KILL_GRACE, run_process


def launcher_prefix(experiment: Experiment) -> list[str]:
    """The `runtime.launcher` tokens (numactl, taskset, ...) put before the command."""
    return tokens(experiment.get("runtime.launcher"), "runtime.launcher")


@register_target("local")
class LocalTarget(ProcessTarget):
    """A child process in its own process group, with the experiment's environment.

    Environment: this process's, then `runtime.env.*`, then the invocation's, then
    `CUDA_VISIBLE_DEVICES` = the invocation's GPU ids (empty for a CPU experiment, so that
    a CPU benchmark never touches a GPU). Mounts are ignored: host paths are used as they are.
    """

    summary = "a child process on this machine (bare metal)"
    kill_grace = DEFAULT_KILL_GRACE

    def command(self, experiment: Experiment, invocation: Invocation) -> list[str]:
        """The argv that runs: the launcher prefix, then the invocation's argv."""
        return launcher_prefix(experiment) + list(invocation.argv)

    def extra_env(self, experiment: Experiment, invocation: Invocation) -> dict[str, str]:
        """What this target adds to (or changes in) the inherited environment."""
        env = experiment_env(experiment)
        env.update(invocation.env)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(invocation.gpus)
        return env

    def preflight(self, experiments: Sequence[Experiment]) -> None:
        """Check that every `runtime.launcher` program exists on PATH."""
        seen: set[str] = set()
        for experiment in experiments:
            prefix = launcher_prefix(experiment)
            if prefix and prefix[0] not in seen:
                seen.add(prefix[0])
                if shutil.which(prefix[0]) is None:
                    raise LaunchError(
                        f"runtime.launcher: {prefix[0]!r} not found on PATH "
                        f"(experiment {experiment_label(experiment)})",
                        hint="install it, or give its full path")

    def describe(self, experiment: Experiment, invocation: Invocation) -> dict[str, Any]:
        """argv, the added environment and the working directory."""
        return {"target": self.name, "argv": self.command(experiment, invocation),
                "env": self.extra_env(experiment, invocation),
                "cwd": invocation.workdir}

    def run(self, experiment: Experiment, invocation: Invocation, log: BinaryIO,
            timeout: float | None, *, on_start: OnStart | None = None) -> Outcome:
        """Run to the end; see `ProcessTarget.run`."""
        env = dict(os.environ)
        env.update(self.extra_env(experiment, invocation))
        return run_process(self.command(experiment, invocation), env=env,
                           cwd=invocation.workdir, log=log, timeout=timeout,
                           grace=self.kill_grace, on_start=on_start)
