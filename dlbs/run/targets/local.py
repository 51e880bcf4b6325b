"""The `local` target: the benchmark as a child process on this machine (bare metal)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Sequence
from typing import Any, BinaryIO

from dlbs.errors import LaunchError
from dlbs.recipes.invocation import Invocation
from dlbs.run.outcome import Outcome
from dlbs.run.targets.base import OnStart, ProcessTarget, register_target
from dlbs.run.targets.process import DEFAULT_KILL_GRACE, run_process


@register_target("local")
class LocalTarget(ProcessTarget):
    """A child process in its own process group, with the invocation's environment.

    Environment: this process's, then the invocation's, then `CUDA_VISIBLE_DEVICES` = the
    invocation's GPU ids (empty for a CPU experiment, so that a CPU benchmark never touches a
    GPU). Mounts are ignored: host paths are used as they are.
    """

    summary = "a child process on this machine (bare metal)"
    kill_grace = DEFAULT_KILL_GRACE

    @staticmethod
    def extra_env(invocation: Invocation) -> dict[str, str]:
        """What this target adds to (or changes in) the inherited environment."""
        env = dict(invocation.env)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(invocation.gpus)
        return env

    def preflight(self, invocations: Sequence[Invocation]) -> None:
        """Check that the program each invocation starts (its first token) can be found."""
        seen: set[str] = set()
        for invocation in invocations:
            program = invocation.argv[0] if invocation.argv else ""
            if program in seen:
                continue
            seen.add(program)
            if not program or shutil.which(program) is None:
                raise LaunchError(
                    f"{program!r} not found (the first word of experiment "
                    f"{invocation.label}'s command: runtime.launcher or the interpreter)",
                    hint="install it, put it on PATH, or give its full path")

    def describe(self, invocation: Invocation) -> dict[str, Any]:
        """argv, the added environment and the working directory."""
        return {"target": self.name, "argv": list(invocation.argv),
                "env": self.extra_env(invocation), "cwd": invocation.workdir}

    def run(self, invocation: Invocation, log: BinaryIO, timeout: float | None, *,
            on_start: OnStart | None = None, stop: threading.Event | None = None) -> Outcome:
        """Run to the end; see `ProcessTarget.run`."""
        env = dict(os.environ)
        env.update(self.extra_env(invocation))
        return run_process(invocation.argv, env=env, cwd=invocation.workdir, log=log,
                           timeout=timeout, grace=self.kill_grace, on_start=on_start,
                           stop=stop)
