"""The `local` target: the benchmark as a child process on this machine (bare metal)."""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Mapping, Sequence
from typing import Any, BinaryIO

from dlbs.errors import LaunchError
from dlbs.recipes.invocation import Invocation
from dlbs.run.interrupts import forced_event
from dlbs.run.marks import OWNER_VARIABLE, TOKEN_VARIABLE
from dlbs.run.outcome import Outcome
from dlbs.run.targets.base import OnStart, ProcessTarget, register_target
from dlbs.run.targets.orphans import boot_id, owner_identity, stop_tree
from dlbs.run.targets.process import DEFAULT_KILL_GRACE, run_process
from dlbs.util.credentials import benchmark_environment


@register_target("local")
class LocalTarget(ProcessTarget):
    """A child process in its own process group, with the invocation's environment.

    Environment: this process's, then the invocation's, then `CUDA_VISIBLE_DEVICES` = the
    invocation's GPU ids (empty for a CPU experiment, so that a CPU benchmark never touches a
    GPU), and the attempt's token as `DLBS_ATTEMPT` with its owner as `DLBS_RUN` (inherited
    by the whole process tree). When the attempt ends (normally, by its timeout or by a stop
    request), every process still carrying its token is stopped too: those that left the
    process group (`setsid`, daemonized workers). If dlbs dies first, the next run finds them
    by the token (`stop_leftovers`). Mounts are ignored: host paths are used as they are.
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
            on_start: OnStart | None = None, stop: threading.Event | None = None,
            token: str | None = None) -> Outcome:
        """Run to the end; see `ProcessTarget.run`."""
        env = benchmark_environment()   # without the results store's credentials
        env.update(self.extra_env(invocation))
        if token:
            env[TOKEN_VARIABLE] = token
            env[OWNER_VARIABLE] = owner_identity()
        try:
            return run_process(invocation.argv, env=env, cwd=invocation.workdir, log=log,
                               timeout=timeout, grace=self.kill_grace, on_start=on_start,
                               stop=stop)
        finally:
            if token:  # what left the process group, and would outlive the attempt
                forced = forced_event(stop)
                stop_tree(TOKEN_VARIABLE, token,
                          0.0 if forced is not None and forced.is_set() else self.kill_grace,
                          OWNER_VARIABLE)

    def stop_leftovers(self, invocation: Invocation, mark: Mapping[str, Any]) -> list[str]:
        """Every process that carries the attempt's token and no live run's (`orphans`)."""
        host = mark.get("host")
        if host != socket.gethostname():
            raise LaunchError(f"experiment {invocation.label} ran on host {host}, not here: "
                              f"look there for processes with {TOKEN_VARIABLE}="
                              f"{mark.get('token')} in their environment")
        if mark.get("boot") != boot_id():
            return []  # this host rebooted since: nothing of that run is left
        stopped = stop_tree(TOKEN_VARIABLE, str(mark.get("token") or ""), self.kill_grace,
                            OWNER_VARIABLE)
        if not stopped:
            return []
        names = ", ".join(sorted({process.name for process in stopped}))
        return [f"{len(stopped)} process{'es' if len(stopped) > 1 else ''} ({names})"]
