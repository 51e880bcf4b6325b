"""Stopping what runs, on every process target: a forced stop, and what a dead dlbs left.

Issue 14, defects 1 and 2. Each case runs for real: a child process, a container of the Docker
Engine, a container of Podman through its Docker-compatible API. A stop request with
`forced` set (a second stop signal of dlbs) kills at once, whatever the grace period; a
benchmark whose `dlbs run` was killed with SIGKILL keeps running until `stop_leftovers`,
given the attempt's mark, finds and stops it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dlbs.run import marks
from dlbs.run.interrupts import StopEvent
from dlbs.run.targets import get_target
from dlbs.run.targets.orphans import find_tree, start_ticks, stop_tree
from tests.targets.conftest import REPO, make_invocation

TARGETS = [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
    pytest.param("podman", id="podman", marks=pytest.mark.docker),
]
#: Ignores SIGINT and SIGTERM (a container's first process ignores them anyway), says it runs.
STUBBORN = 'trap "" INT TERM; echo ready; while :; do sleep 0.1; done'


@pytest.fixture(params=TARGETS)
def target_and_experiment(request: pytest.FixtureRequest,
                          tmp_path: Path) -> Iterator[tuple[Any, dict]]:
    name = request.param
    experiment: dict[str, Any] = {"exp.id": f"stop-{name}-{tmp_path.name}",
                                  "exp.log_file": str(tmp_path / "exp.log")}
    if name == "docker":
        image = request.getfixturevalue("test_image")
        experiment.update({"exp.docker": True, "exp.docker_image": image["name"],
                           "exp.docker_args": ["--ipc=host"]})
    if name == "podman":
        image = request.getfixturevalue("podman_image")
        experiment.update({"exp.docker": True, "exp.docker_image": image["name"],
                           "exp.container_engine": "podman",
                           "runtime.podman_socket": image["socket"],
                           "exp.docker_args": ["--ipc=host"]})
        name = "docker"
    target = get_target(name)
    target.kill_grace = 600.0  # type: ignore[attr-defined]  # only a forced stop ends soon
    yield target, experiment
    target.close()


def _wait_for(condition: Any, what: str, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_forced_stop_kills_at_once_whatever_the_grace(target_and_experiment, tmp_path):
    target, experiment = target_and_experiment
    log_path = tmp_path / "exp.log"
    stop = StopEvent()
    result: dict[str, Any] = {}

    def run() -> None:
        with open(log_path, "ab") as log:
            result["outcome"] = target.run(make_invocation(experiment, ["sh", "-c", STUBBORN]),
                                           log, None, stop=stop)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        _wait_for(lambda: log_path.exists() and b"ready" in log_path.read_bytes(),
                  "the command did not start")
        stop.set()  # SIGINT, ignored: the grace period (600 s) begins
        stop.forced.set()
        worker.join(timeout=120)
        assert not worker.is_alive(), "a forced stop waited for the grace period"
    finally:
        target.kill_grace = 1.0
        stop.forced.set()
        worker.join(timeout=120)
    assert result["outcome"].status == "interrupted"


RUNNER = """
import json, sys
from dlbs.run import marks
from dlbs.run.targets import get_target
from tests.targets.conftest import make_invocation

name, experiment, log_path = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
target = get_target(name)
mark = marks.new_mark(name)
invocation = make_invocation(experiment, ["sh", "-c", sys.argv[4]])
with open(log_path, "ab") as log:
    target.run(invocation, log, None, token=mark["token"],
               on_start=lambda pid: print(json.dumps(marks.with_process(mark, pid)), flush=True))
"""


def _running(target: Any, mark: dict, engine: str) -> bool:
    """Whether anything of the attempt still runs: its processes, or its container."""
    if target.name == "local":
        return bool(find_tree(marks.TOKEN_VARIABLE, mark["token"]))
    return any(c.status == "running" for c in _labelled(target, mark, engine))


def _labelled(target: Any, mark: dict, engine: str) -> list:
    """The containers with the attempt's label, on `engine` ("": the Docker Engine)."""
    return target.engine_client(engine).containers.list(
        all=True, filters={"label": f"{marks.TOKEN_LABEL}={mark['token']}"})


def _runner(target: Any, experiment: dict, log_path: Path) -> subprocess.Popen[str]:
    """A `dlbs run` stand-in running STUBBORN on the target; it prints the attempt's mark."""
    return subprocess.Popen(
        [sys.executable, "-c", RUNNER, target.name, json.dumps(experiment), str(log_path),
         STUBBORN], cwd=REPO, stdout=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(REPO)})


def test_what_a_killed_dlbs_left_running_is_found_and_stopped(target_and_experiment, tmp_path):
    target, experiment = target_and_experiment
    target.kill_grace = 1.0
    engine = experiment.get("runtime.podman_socket", "")
    log_path = tmp_path / "exp.log"
    runner = _runner(target, experiment, log_path)
    mark: dict[str, Any] = {}
    try:
        assert runner.stdout is not None
        mark = json.loads(runner.stdout.readline())
        _wait_for(lambda: log_path.exists() and b"ready" in log_path.read_bytes(),
                  "the command did not start")
        if target.name == "local":  # the whole tree carries the token and its owner
            assert f"\0{marks.OWNER_VARIABLE}={runner.pid}:".encode() in _environ_of(mark["pid"])
        else:
            (container,) = _labelled(target, mark, engine)
            assert container.labels[marks.OWNER_LABEL].split(":")[0] == str(runner.pid)
        assert target.stop_leftovers(make_invocation(experiment, ["true"]), mark) == []
        assert _running(target, mark, engine)  # its run lives: never stopped by another
        os.killpg(runner.pid, signal.SIGKILL)  # dlbs dies; its benchmark has its own session
        runner.wait(timeout=60)
        assert _running(target, mark, engine)  # left running
        invocation = make_invocation(experiment, ["true"])
        stopped = target.stop_leftovers(invocation, mark)
        assert len(stopped) == 1, stopped
        assert not _running(target, mark, engine)
        if target.name != "local":
            assert _labelled(target, mark, engine) == []  # removed, not only stopped
        assert target.stop_leftovers(invocation, mark) == []  # nothing left the second time
    finally:
        runner.stdout.close()  # type: ignore[union-attr]
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
        if mark:
            target.stop_leftovers(make_invocation(experiment, ["true"]), mark)


def _environ_of(pid: int) -> bytes:
    with open(f"/proc/{pid}/environ", "rb") as stream:
        return stream.read()


# -- the local target's finding: by the token alone, never by what a database says ---------------

def _sleeper(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "600"], start_new_session=True,
                            env={**os.environ, **(env or {})})


def test_a_process_named_by_pid_and_start_time_alone_is_never_stopped():
    """Issue 24, item 3: a recorded pid and start time (a crafted row) name no process."""
    unrelated = _sleeper()
    try:
        start = start_ticks(unrelated.pid)
        assert start is not None
        assert find_tree(marks.TOKEN_VARIABLE, "") == {}
        assert find_tree(marks.TOKEN_VARIABLE, "no-such-token") == {}
        assert stop_tree(marks.TOKEN_VARIABLE, "", 1.0) == []
        target = get_target("local")
        crafted = {**marks.new_mark("local"), "pid": unrelated.pid, "start": start}
        assert target.stop_leftovers(make_invocation({"exp.id": "x"}, ["true"]), crafted) == []
        assert unrelated.poll() is None
    finally:
        unrelated.kill()
        unrelated.wait()


def test_processes_are_found_by_their_mark_alone():
    # Tokens of this test's own: stop_tree stops what carries its token anywhere on the
    # machine, other tests' processes too (a fixed token was shared with test_run_ownership).
    token = uuid.uuid4().hex
    marked = _sleeper({marks.TOKEN_VARIABLE: token})
    other = _sleeper({marks.TOKEN_VARIABLE: uuid.uuid4().hex})
    try:
        stopped = stop_tree(marks.TOKEN_VARIABLE, token, 5.0)
        assert [process.pid for process in stopped] == [marked.pid]
        assert marked.wait(timeout=30) == -signal.SIGTERM
        assert other.poll() is None
    finally:
        for process in (marked, other):
            process.kill()
            process.wait()


def test_leftovers_of_another_host_are_a_clear_error_and_of_another_boot_nothing():
    from dlbs.errors import LaunchError

    target = get_target("local")
    invocation = make_invocation({"exp.id": "elsewhere"}, ["true"])
    mark = {**marks.new_mark("local"), "host": "some-other-host"}
    with pytest.raises(LaunchError, match="ran on host some-other-host, not here"):
        target.stop_leftovers(invocation, mark)
    rebooted = {**marks.new_mark("local"), "boot": "an-earlier-boot", "pid": os.getpid()}
    assert target.stop_leftovers(invocation, rebooted) == []
