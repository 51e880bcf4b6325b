"""The node monitor: what a SLURM job's node used, and what the node is, as protocol lines.

A job script starts it on every node of the job, beside the benchmark (docs/monitor.md):

    python3 dlbs-node-monitor.pyz --out LOG.NODE.dlbs-node --node NODE --tag TAG \
        [--frequency SECONDS] [--energy 1] [--gpus 0,1] [--log LOG]

It writes the node's environment at once (`__job.environment.<node>__={...}`, the facts of
`probe`), then samples every process of this node that carries `DLBS_MONITOR_TAG=<tag>`
(and their children) until SIGTERM, SIGINT or SIGHUP, and writes the series
(`__job.monitor.<node>__={"start": <epoch s>, "frequency": s, "series": {...},
"warnings": [...]}`); with `--log`, it follows the experiment's log for the backend's marks
of its timed interval and samples at each (`sampling`). With `--frequency 0 --energy 1` it
takes only those samples, of the energy counters (the energy at the marks). Each line is
appended to `--out` in one write. The job script appends the node files to the experiment's
log when the benchmark has ended (the run loop does it for a job that was killed first), and
the run loop turns them into `results.use.*` and the attempt's environment.

Stand-alone: standard library only, Python 3.8 or newer, no dlbs needed on the node.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading

from .probe import machine_environment
from .sampling import Sampler, TaggedProcesses

#: Protocol keys of the node monitor's lines (the node's name follows, made key-safe).
ENVIRONMENT_KEY = "job.environment"
MONITOR_KEY = "job.monitor"
#: The suffix of a node's file beside the experiment's log: `<log>.<node>.dlbs-node`.
NODE_FILE_SUFFIX = ".dlbs-node"

_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]")


def key_safe(node: str) -> str:
    """A node name as a protocol key part: letters, digits, `_` and `-`."""
    return _UNSAFE.sub("_", node) or "node"


def append_line(path: str, key: str, value: object) -> None:
    """Append `__key__=json` to `path` in one write (NaN stays NaN: json.loads reads it)."""
    line = f"__{key}__={json.dumps(value, default=str)}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _arguments(argv: list | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="dlbs-node-monitor",
        description="Write this node's environment and resource series as dlbs protocol lines.")
    parser.add_argument("--out", required=True, help="file the lines are appended to")
    parser.add_argument("--node", required=True, help="this node's name (SLURMD_NODENAME)")
    parser.add_argument("--tag", default="", help="the DLBS_MONITOR_TAG value to watch")
    parser.add_argument("--frequency", type=float, default=0.0,
                        help="seconds between samples; 0: the environment only, or with "
                             "--energy 1 the energy counters at the log's timed marks")
    parser.add_argument("--energy", type=int, choices=(0, 1), default=0,
                        help="1: read the energy counters at the log's timed marks")
    parser.add_argument("--gpus", default="", help="GPU ids as nvidia-smi numbers them")
    parser.add_argument("--nvidia-smi", default="nvidia-smi", dest="nvidia_smi")
    parser.add_argument("--log", default="", help="the experiment's log, for the timed marks")
    return parser.parse_args(argv)


def main(argv: list | None = None) -> int:
    """Run the node monitor; see the module doc. Exit status 0, 2 for a bad command line."""
    try:
        return _monitor(argv)
    finally:
        # Python gives signals back their default action when it shuts down: a SIGTERM that
        # comes now would kill the monitor (status 143) after its work is done.
        for name in ("SIGTERM", "SIGINT", "SIGHUP"):
            signal.signal(getattr(signal, name), signal.SIG_IGN)


def _monitor(argv: list | None) -> int:
    stop = threading.Event()

    def request_stop(signum: int, frame: object) -> None:
        stop.set()

    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        signal.signal(getattr(signal, name), request_stop)
    args = _arguments(argv)
    # The file exists from here on: the job's task waits for it before it sends SIGTERM,
    # which now stops the monitor cleanly instead of killing it.
    os.close(os.open(args.out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
    node = key_safe(args.node)
    sampler = None
    if args.tag and (args.frequency > 0 or (args.energy and args.log)):
        try:
            sampler = Sampler(args.frequency, args.gpus, args.nvidia_smi, log=args.log or None)
        except ValueError as error:
            print(f"dlbs-node-monitor: {error}", file=sys.stderr)
            return 2
        sampler.start_workload(TaggedProcesses(args.tag, exclude=os.getpid()))
    environment = machine_environment()
    environment["node"] = args.node
    append_line(args.out, f"{ENVIRONMENT_KEY}.{node}", environment)
    if sampler is None:
        return 0
    while not stop.wait(60.0):
        pass
    series = sampler.stop()
    append_line(args.out, f"{MONITOR_KEY}.{node}", {
        "node": args.node, "start": round(sampler.started_epoch, 3),
        "frequency": sampler.frequency, "series": series, "warnings": sampler.warnings})
    return 0
