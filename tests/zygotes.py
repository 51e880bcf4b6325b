"""The fork servers that the backends `dlbs run` starts in the tests are forked from.

A `dlbs run` of the PyTorch or MXNet backend starts a fresh interpreter for each experiment,
which spends 2 (MXNet) to 5.5 (torch, torchvision, torch._dynamo) CPU-seconds importing its
framework before a run of a few hundred milliseconds: about 140 such processes made a third of
the suite's CPU time on the 2-core test machine. tests/preloaded.py forks the tests' direct
backend runs from an interpreter that imported the framework once; this module does the same
for the runs that go through dlbs, without dlbs knowing: each worker puts tests/zygote on
PYTHONPATH, whose sitecustomize.py hands a backend's run to this worker's server
(tests/zygote/server.py) and stays the process dlbs started, waits on and signals. What is
not the same as a fresh interpreter, and why the tests it matters to start their own
(`@pytest.mark.fresh_backends`), is in tests/zygote/README.md.

`DLBS_TEST_ZYGOTE=0` gives every backend a fresh interpreter.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import preloaded, runs

ZYGOTE_DIR = Path(__file__).resolve().parent / "zygote"
VARIABLE = "DLBS_TEST_ZYGOTE"
#: What each server imports: what the backend's runs import, as tests/preloaded.py's servers.
MODULES = {"torch": preloaded.TORCH.modules, "mxnet": preloaded.MXNET.modules}
#: The environment the recipes give a backend that a library reads when it loads
#: (configs: mxnet.env), so that the server's load-time variables are the runs'.
_RECIPE_ENV = {"mxnet": {"MXNET_CUDA_ALLOW_TENSOR_CORE": "1"}}
_servers: dict[str, subprocess.Popen[bytes]] = {}


def enabled() -> bool:
    return os.environ.get(VARIABLE, "") != "0"


def activate(config: pytest.Config) -> None:
    """In each process that runs tests: the servers' folder, and tests/zygote on PYTHONPATH."""
    if not enabled():
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    os.environ[VARIABLE] = str(runs.folder() / f"zygote-{worker}")
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ZYGOTE_DIR) not in path:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ZYGOTE_DIR), *path])


def ensure(kind: str, load_time: dict[str, str] | None = None) -> None:
    """Start this worker's `kind` server unless it runs (it serves once it has imported).

    `load_time`: variables that the runs get and a library reads when it loads (the
    evaluation tests' OMP_NUM_THREADS=1): a server of its own has them.
    """
    folder = os.environ.get(VARIABLE, "")
    extra = {**_RECIPE_ENV.get(kind, {}), **(load_time or {})}
    name = kind + "".join(f"-{key}={value}" for key, value in sorted((load_time or {}).items()))
    if not folder or folder == "0" or name in _servers:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **extra}
    env.pop("PYTEST_CURRENT_TEST", None)
    with open(Path(folder) / f"{name}.log", "ab") as log:
        _servers[name] = subprocess.Popen(
            [sys.executable, str(ZYGOTE_DIR / "server.py"), str(Path(folder) / f"{name}.json"),
             json.dumps(MODULES[kind])],
            stdin=subprocess.PIPE, stdout=log, stderr=log, env=env, cwd=folder,
            start_new_session=True)
    if len(_servers) == 1:
        atexit.register(stop)


def stop() -> None:
    """End the servers (their stdin closes); their children end with their clients."""
    for server in _servers.values():
        if server.stdin is not None:
            server.stdin.close()
    for server in _servers.values():
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    _servers.clear()


def for_test(item: pytest.Item, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before a test: start the servers its markers ask for, or none for `fresh_backends`."""
    if item.get_closest_marker("fresh_backends"):
        monkeypatch.setenv(VARIABLE, "0")
        return
    if item.get_closest_marker("pytorch") or item.get_closest_marker("onnxruntime"):
        ensure("torch")
    if item.get_closest_marker("mxnet"):
        ensure("mxnet")
