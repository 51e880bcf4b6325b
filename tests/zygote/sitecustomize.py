"""In the tests, a backend that `dlbs run` starts runs forked from a fork server (README.md).

Python imports this module at start-up wherever tests/zygote is on PYTHONPATH (the tests put
it there). It does nothing unless the process is a backend run that the fork server can run
as the interpreter would: a script of the PyTorch or MXNet backend (or the ONNX Runtime
exporter) started by dlbs's local target (DLBS_ATTEMPT set), not a rank of a launcher, not in
a SLURM job, with the variables that libraries read when they load equal to the server's, and
`DLBS_TEST_ZYGOTE` naming the server's folder. Then this process stays the one that dlbs
started and waits on: it hands its argv, environment, working directory and stdin, stdout and
stderr to the server, passes on every signal it gets to the child, and ends as the child
ended (its exit status, or the same signal). Anything else, or any failure to reach the
server, and start-up goes on as it would have.
"""

from __future__ import annotations

import os
import sys

#: Variables that a library reads when it loads (the server loaded them with its own values).
_LOAD_TIME_PREFIXES = ("OMP_", "MKL_", "KMP_", "GOMP_", "LD_", "MALLOC_", "MXNET_", "DNNL_",
                       "ONEDNN_", "TORCH", "PYTORCH_", "OPENBLAS_", "PYTHONHASHSEED",
                       "PYTHONMALLOC", "PYTHONWARNINGS", "PYTHONDEVMODE", "PYTHONOPTIMIZE")
#: Set in the ranks of a launcher and in SLURM jobs: those start as they are.
_ELSEWHERE = ("RANK", "LOCAL_RANK", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "DMLC_ROLE",
              "OMPI_COMM_WORLD_RANK")
#: The scripts a server can run, by the end of their path: the server that has their modules.
_SCRIPTS = {os.path.join("pytorch_benchmarks", "benchmarks.py"): "torch",
            os.path.join("onnxruntime_benchmarks", "export.py"): "torch",
            os.path.join("mxnet_benchmarks", "benchmarks.py"): "mxnet"}
_FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")


#: Read when they are used, not when a library loads (torch's import sets the first).
_RUN_TIME = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def load_time_environment(env) -> dict:
    """The variables of `env` that a library may read when it loads."""
    return {key: value for key, value in env.items()
            if key.startswith(_LOAD_TIME_PREFIXES) and key not in _RUN_TIME}


def _server_info():
    folder = os.environ.get("DLBS_TEST_ZYGOTE", "")
    if not folder or folder == "0" or "DLBS_ATTEMPT" not in os.environ:
        return None
    if any(name in os.environ for name in _ELSEWHERE):
        return None
    argv = getattr(sys, "argv", None) or []
    if len(sys.orig_argv) < 2 or not argv or sys.orig_argv[1] != argv[0]:
        return None  # interpreter options, -c or -m
    script = os.path.realpath(argv[0])
    kind = next((name for tail, name in _SCRIPTS.items() if script.endswith(os.sep + tail)),
                None)
    if kind is None:
        return None
    import json

    own = load_time_environment(os.environ)
    try:  # the servers of this kind: one for each load-time environment tests/zygotes.py made
        names = sorted(name for name in os.listdir(folder)
                       if name.startswith(kind) and name.endswith(".json"))
    except OSError:
        return None
    first = None
    for name in names:
        try:
            with open(os.path.join(folder, name)) as found:
                info = json.load(found)
        except (OSError, ValueError):
            continue
        if info.get("env") == own:
            return info, json
        first = first or info
    if first is not None:
        theirs = first.get("env") or {}
        differ = sorted(key for key in set(own) | set(theirs) if own.get(key) != theirs.get(key))
        try:  # what made a run start as it is, for tests/zygote/README.md's numbers
            with open(os.path.join(folder, "misses.log"), "a") as log:
                log.write(f"{kind} {' '.join(differ)}\n")
        except OSError:
            pass
    return None


def _run_in_the_server() -> None:
    found = _server_info()
    if found is None:
        return
    info, json = found
    import signal
    import socket

    request = json.dumps({"argv": sys.argv, "env": dict(os.environ),
                          "cwd": os.getcwd()}).encode()
    child: list[int] = []
    pending: list[int] = []

    def pass_on(number, frame):
        if not child:  # before the server answered: passed on once it has
            pending.append(number)
            return
        try:
            os.kill(child[0], number)
        except ProcessLookupError:
            pass

    before = {name: signal.getsignal(getattr(signal, name)) for name in _FORWARDED}
    for name in _FORWARDED:
        signal.signal(getattr(signal, name), pass_on)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(10)
        conn.connect(info["socket"])
        socket.send_fds(conn, [f"{len(request)}\n".encode() + request], [0, 1, 2])
        reply = b""
        while b"\n" not in reply:
            more = conn.recv(64)
            if not more:
                raise ConnectionError
            reply += more
    except (OSError, ValueError):
        conn.close()
        for name, handler in before.items():  # no server: this interpreter runs the script
            signal.signal(getattr(signal, name), handler)
        for number in pending:
            os.kill(os.getpid(), number)
        return
    line, _, reply = reply.partition(b"\n")
    child.append(int(line))
    for number in pending:
        pass_on(number, None)
    conn.settimeout(None)
    while b"\n" not in reply:
        more = conn.recv(64)
        if not more:  # the server ended first: the child went with it
            os._exit(1)
        reply += more
    status = int(reply.partition(b"\n")[0])
    if status < 0:
        try:
            signal.signal(-status, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP keep theirs
            pass
        os.kill(os.getpid(), -status)
    os._exit(status & 0xFF)


_run_in_the_server()
