#!/usr/bin/env python3
r"""Start an MXNet parameter-server job: scheduler, servers and workers, from `DMLC_*` variables.

MXNet's own `tools/launch.py` does not run on Python 3.11; this replaces its local mode:

    python -m mxnet_benchmarks.launch_dist --num_workers 2 --num_servers 1 -- \\
        python benchmarks.py --model resnet50 --device cpu --kv_store dist_sync

Every role gets `DMLC_ROLE`, `DMLC_PS_ROOT_URI`, `DMLC_PS_ROOT_PORT`, `DMLC_NUM_WORKER` and
`DMLC_NUM_SERVER`. Scheduler and servers are bare `import mxnet` processes (MXNet turns an
import with `DMLC_ROLE=server|scheduler` into the server loop); workers run the command.
The scheduler gives worker ranks; the rank-0 worker prints the job's results.

On several nodes (SLURM), run one launcher per node, all with the same `--host` (the
scheduler's node) and `--port`, and the per-node `--local_workers` / `--local_servers`;
`--scheduler auto` starts the scheduler only where `SLURM_NODEID` is 0 (or unset).

The launcher exits with the first failing process's status and kills the others (their
whole process groups); it prints `__results.status__="failure"` with the reason, so a job
that died is never read as a result. Children die with it even if it is killed (-9).
Imports only the standard library.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

_PR_SET_PDEATHSIG = 1
#: How long servers and scheduler get to leave on their own after the workers finished.
_SHUTDOWN_GRACE_S = 30.0
_KILL_GRACE_S = 5.0
_POLL_S = 0.1
_SERVER_CODE = (
    "import warnings; warnings.filterwarnings('ignore', category=DeprecationWarning); "
    "import mxnet"
)


@dataclass
class Role:
    """One started process of the job."""

    name: str  # "scheduler", "server 0", "worker 1"
    process: subprocess.Popen

    @property
    def is_worker(self) -> bool:
        """Workers decide when the job is done; servers follow them."""
        return self.name.startswith("worker")


class LaunchFailed(Exception):
    """A role failed, the job timed out or the launcher was interrupted."""

    def __init__(self, message: str, exit_status: int) -> None:
        super().__init__(message)
        self.exit_status = exit_status


def free_port(host: str) -> int:
    """A TCP port that is free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: own process group, and SIGKILL when the launcher dies."""
    os.setpgrp()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the launcher's own cleanup still runs
        pass


def role_environment(base: dict[str, str], role: str, host: str, port: int, num_workers: int,
                     num_servers: int, node_host: str | None) -> dict[str, str]:
    """`base` plus the `DMLC_*` variables of one role."""
    env = dict(base)
    env.update({
        "DMLC_ROLE": role,
        "DMLC_PS_ROOT_URI": host,
        "DMLC_PS_ROOT_PORT": str(port),
        "DMLC_NUM_WORKER": str(num_workers),
        "DMLC_NUM_SERVER": str(num_servers),
    })
    if node_host:
        env["DMLC_NODE_HOST"] = node_host
    return env


def _start(name: str, argv: list[str], env: dict[str, str]) -> Role:
    process = subprocess.Popen(argv, env=env, preexec_fn=_die_with_parent)
    return Role(name, process)


def _kill_all(roles: list[Role]) -> None:
    """SIGTERM every live process group, then SIGKILL what is left after a grace period."""
    for sig, grace in ((signal.SIGTERM, _KILL_GRACE_S), (signal.SIGKILL, _KILL_GRACE_S)):
        live = [role for role in roles if role.process.poll() is None]
        for role in live:
            try:
                os.killpg(role.process.pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while any(role.process.poll() is None for role in live):
            if time.monotonic() > deadline:
                break
            time.sleep(_POLL_S)
    for role in roles:  # reap, so nothing stays a zombie
        try:
            role.process.wait(timeout=_KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            pass


def supervise(roles: list[Role], timeout_s: float | None) -> None:
    """Wait for the workers; raise LaunchFailed on the first failure or on timeout."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    workers_done_at = None
    servers_done_at = None
    while True:
        for role in roles:
            status = role.process.poll()
            if status is not None and status != 0:
                raise LaunchFailed(f"{role.name} exited with status {status}",
                                   status if status > 0 else 128 - status)
        workers = [role for role in roles if role.is_worker]
        others = [role for role in roles if not role.is_worker]
        if all(role.process.poll() is not None for role in workers):
            if workers_done_at is None:
                workers_done_at = time.monotonic()
            if all(role.process.poll() is not None for role in others):
                return
            if time.monotonic() - workers_done_at > _SHUTDOWN_GRACE_S:
                # The workers' results are complete; a server that does not leave is
                # stopped rather than turned into a failure of the benchmark.
                print("launch_dist: servers still running after the workers finished; "
                      "stopping them", file=sys.stderr)
                return
        elif any(role.process.poll() is not None for role in others):
            # Servers leave as soon as the workers say goodbye, which can be a moment before
            # the last worker process ends; a worker still there after the grace period
            # has lost its servers.
            if servers_done_at is None:
                servers_done_at = time.monotonic()
            elif time.monotonic() - servers_done_at > _SHUTDOWN_GRACE_S:
                ended = next(role for role in others if role.process.poll() is not None)
                raise LaunchFailed(f"{ended.name} exited before the workers finished", 1)
        if deadline is not None and time.monotonic() > deadline:
            raise LaunchFailed(f"job timed out after {timeout_s:g} s", 124)
        time.sleep(_POLL_S)


def _print_failure(message: str) -> None:
    # The same lines benchmarks.py prints, so the job's log is judged a failure.
    print(f'__results.status__="failure"\n__results.status_msg__="launch_dist: {message}"',
          flush=True)
    print(f"launch_dist: error: {message}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    """The launcher's command line."""
    p = argparse.ArgumentParser(
        prog="launch_dist.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--num_workers", type=int, required=True, help="workers in the whole job")
    p.add_argument("--num_servers", type=int, default=1, help="servers in the whole job")
    p.add_argument("--local_workers", type=int, default=None,
                   help="workers started here (default: all)")
    p.add_argument("--local_servers", type=int, default=None,
                   help="servers started here (default: all)")
    p.add_argument("--scheduler", choices=("auto", "yes", "no"), default="auto",
                   help="start the scheduler here; auto: unless SLURM_NODEID is not 0")
    # Under SLURM the job script exports the first node's address as MASTER_ADDR/MASTER_PORT,
    # so one launcher per node finds the scheduler without a shell expanding anything.
    p.add_argument("--host", default=os.environ.get("MASTER_ADDR", "127.0.0.1"),
                   help="the scheduler's address (default: $MASTER_ADDR, else 127.0.0.1)")
    p.add_argument("--port", type=int, default=int(os.environ.get("MASTER_PORT", "0") or 0),
                   help="the scheduler's port (default: $MASTER_PORT, else 0: a free one)")
    p.add_argument("--node_host", default=None,
                   help="this node's address for the others (default: --host when every "
                   "role runs here, else MXNet's guess)")
    p.add_argument("--python", default=sys.executable,
                   help="interpreter with mxnet for scheduler and servers")
    p.add_argument("--timeout", type=float, default=None, help="kill the job after S seconds")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- the worker command")
    return p


def main(argv: list[str] | None = None) -> int:
    """Launch the job described by `argv`; return the exit status."""
    args = build_parser().parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        build_parser().error("give the worker command after --")
    if args.num_workers < 1 or args.num_servers < 1:
        build_parser().error("--num_workers and --num_servers must be at least 1")
    local_workers = args.num_workers if args.local_workers is None else args.local_workers
    local_servers = args.num_servers if args.local_servers is None else args.local_servers
    everything_here = (local_workers, local_servers) == (args.num_workers, args.num_servers)
    if args.scheduler == "auto":
        start_scheduler = os.environ.get("SLURM_NODEID", "0") == "0"
    else:
        start_scheduler = args.scheduler == "yes"
    if args.port == 0:
        if not start_scheduler:
            build_parser().error("--port is needed on nodes that do not run the scheduler")
        port = free_port(args.host)
    else:
        port = args.port
    node_host = args.node_host or (args.host if everything_here else None)

    def env(role: str) -> dict[str, str]:
        return role_environment(dict(os.environ), role, args.host, port, args.num_workers,
                                args.num_servers, node_host)

    roles: list[Role] = []

    def on_signal(signum, frame):
        raise LaunchFailed(f"interrupted by signal {signum}", 128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server_argv = [args.python, "-c", _SERVER_CODE]
        if start_scheduler:
            roles.append(_start("scheduler", server_argv, env("scheduler")))
        for index in range(local_servers):
            roles.append(_start(f"server {index}", server_argv, env("server")))
        for index in range(local_workers):
            roles.append(_start(f"worker {index}", command, env("worker")))
        supervise(roles, args.timeout)
        return 0
    except LaunchFailed as failure:
        # Stop the others first: a worker killed now prints its own failure line, and the
        # job's reason must be the last one a log parser sees.
        _kill_all(roles)
        _print_failure(str(failure))
        return failure.exit_status
    except OSError as error:  # the command could not be started
        _kill_all(roles)
        _print_failure(f"cannot start {command[0]!r}: {error}")
        return 127
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        _kill_all(roles)


if __name__ == "__main__":
    sys.exit(main())
