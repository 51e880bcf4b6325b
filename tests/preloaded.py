"""Run a Python script as its own process, forked from an interpreter that imported a framework.

The backends' tests start a hundred-odd PyTorch backend processes. Each fresh interpreter
spends about 4 CPU-s importing torch, torchvision and torch's compiler stack (the optimizer
and the FLOP counter import `torch._dynamo`) before the few hundred milliseconds of the run
itself, and about 2 CPU-s importing MXNet; on the 2-core test machine that was a fifth of the
suite's CPU time.
`PreloadedPython` keeps one server process per pytest worker that imports those modules once,
then forks a child for each run, as PyTorch's DataLoader forks its workers. The child is a
process of its own (its exit status, signals, stdout and stderr as a subprocess's); it runs
the script as `python script.py args` would: `__main__`, `sys.argv`, the script's folder first
on `sys.path`, the requested environment and working directory, and the exit status of
`sys.exit`, an uncaught exception or a signal. It differs from a fresh interpreter in what is
already imported, so tests of start-up (which modules a run imports, a signal during the
imports) start their own interpreter. `run` forks scripts only: a command line that starts
with an interpreter option (`-m` a launcher, `-c`) gets a fresh interpreter, as does a run whose
environment differs from the server's (other than the test's name): libraries read some
variables when they load (OpenMP its thread count). `DLBS_TEST_PRELOAD=0` gives every run a
fresh interpreter.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The code a forked child runs (shared with the servers of `dlbs run`'s backends).
FORKED = Path(__file__).resolve().parent / "zygote" / "forked.py"
#: Variables that pytest changes from test to test; no library reads them when it loads.
_PER_TEST = ("PYTEST_CURRENT_TEST",)

_SERVER = r'''
import importlib.util, json, os, sys, traceback

for name in json.loads(sys.argv[1]):
    __import__(name)
_spec = importlib.util.spec_from_file_location("dlbs_tests_forked", sys.argv[2])
forked = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(forked)
SITE = forked.site_of_this_interpreter()
replies = os.fdopen(os.dup(1), "w", buffering=1)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 1)  # the server prints nothing: its stdout is the reply channel


def child(request):
    os.dup2(null, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    forked.become(request["argv"], request["env"], request["cwd"], SITE)


for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:  # a child never returns to this loop, whatever fails before its script runs
            replies.close()
            child(request)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(127)
    replies.write(f"{pid}\n")
    _, status = os.waitpid(pid, 0)
    replies.write(f"{os.waitstatus_to_exitcode(status)}\n")
'''


class PreloadedPython:
    """A server that imports `modules` once and forks a process for each `run`."""

    def __init__(self, modules: list[str]) -> None:
        self.modules = modules
        self.server: subprocess.Popen[bytes] | None = None
        self.pending = b""
        self.env: dict[str, str] | None = None

    def run(self, argv: list[str], env: dict[str, str], cwd: str | os.PathLike[str] | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """`subprocess.run([sys.executable, *argv], capture_output=True, text=True, ...)`.

        Forked when `argv[0]` is a script and `env` the server's (the server is started at the
        first such run, with its `env`); else run by a fresh interpreter.
        """
        if not self._forks(argv, env):
            return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                                  timeout=timeout, env=env, cwd=cwd)
        if cwd is not None and not os.path.isdir(cwd):  # as subprocess.run raises it
            raise FileNotFoundError(2, "No such file or directory", os.fspath(cwd))
        with tempfile.TemporaryDirectory(prefix="preloaded-") as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            request = {"argv": [str(a) for a in argv], "env": env,
                       "cwd": os.fspath(cwd or os.getcwd()), "stdout": str(out),
                       "stderr": str(err)}
            assert self.server is not None and self.server.stdin is not None
            self.server.stdin.write(json.dumps(request).encode() + b"\n")
            self.server.stdin.flush()
            pid = int(self._reply(None))
            try:
                status = int(self._reply(timeout))
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                self._reply(None)
                raise subprocess.TimeoutExpired([sys.executable, *argv], timeout or 0,
                                                output=out.read_text(errors="replace"),
                                                stderr=err.read_text(errors="replace")) from None
            return subprocess.CompletedProcess([sys.executable, *argv], status,
                                               out.read_text(errors="replace"),
                                               err.read_text(errors="replace"))

    def _forks(self, argv: list[str], env: dict[str, str]) -> bool:
        if not argv or str(argv[0]).startswith("-") or \
                os.environ.get("DLBS_TEST_PRELOAD", "1") == "0":
            return False
        if self.server is None:
            self._start(env)
        return _comparable(env) == _comparable(self.env or {})

    def close(self) -> None:
        if self.server is not None:
            assert self.server.stdin is not None
            self.server.stdin.close()
            self.server.wait(timeout=60)
            assert self.server.stdout is not None
            self.server.stdout.close()
            self.server = None

    def _start(self, env: dict[str, str]) -> None:
        self.env = dict(env)
        self.server = subprocess.Popen([sys.executable, "-c", _SERVER, json.dumps(self.modules),
                                        str(FORKED)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        atexit.register(self.close)

    def _reply(self, timeout: float | None) -> str:
        """The server's next line.

        Read from its pipe directly: a buffered reader could hold a line `select` cannot see.
        """
        assert self.server is not None and self.server.stdout is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self.server.stdout.fileno()
        while b"\n" not in self.pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            with selectors.DefaultSelector() as selector:
                selector.register(fd, selectors.EVENT_READ)
                if not selector.select(left):
                    raise subprocess.TimeoutExpired("preloaded", timeout or 0)
            data = os.read(fd, 4096)
            if not data:
                raise RuntimeError("the preloaded interpreter ended (see its stderr above)")
            self.pending += data
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode()


def _comparable(env: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key not in _PER_TEST}


#: The PyTorch backend's tests: what every run of it imports.
TORCH = PreloadedPython(["numpy", "torch", "torchvision", "torch._dynamo",
                         "torch.utils.flop_counter", "torchvision.ops", "PIL.Image"])
#: The MXNet backend's (MXNet stops and restarts its engine around a fork, for its
#: DataLoader's workers: the server has run nothing).
MXNET = PreloadedPython(["numpy", "mxnet", "PIL.Image"])
