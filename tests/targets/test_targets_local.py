"""The local target: a real child process in its own process group."""

from __future__ import annotations

import io
import os
import signal
import threading
import time

import pytest

from dlbs.errors import LaunchError
from dlbs.recipes import Invocation
from dlbs.run.targets.local import LocalTarget
from tests.targets.conftest import make_invocation


@pytest.fixture
def target() -> LocalTarget:
    target = LocalTarget()
    target.kill_grace = 1.0
    return target


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie that nobody reaped yet is dead for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_output_is_streamed_into_the_log_while_the_process_runs(target, tmp_path):
    release = tmp_path / "release"
    script = f'echo first; while [ ! -e "{release}" ]; do sleep 0.05; done; echo second'
    log_path = tmp_path / "exp.log"
    result = {}
    with open(log_path, "wb") as log:
        log.write(b"header\n")
        worker = threading.Thread(target=lambda: result.update(
            outcome=target.run(Invocation(["sh", "-c", script]), log, 30)))
        worker.start()
        deadline = time.monotonic() + 20
        while b"first" not in log_path.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log_path.read_bytes() == b"header\nfirst\n"  # seen before the process ended
        release.touch()
        worker.join(20)
    assert result["outcome"].status == "ok"
    assert log_path.read_bytes() == b"header\nfirst\nsecond\n"


def test_a_log_without_a_file_descriptor_gets_the_output_too(target):
    log = io.BytesIO()
    outcome = target.run(Invocation(["sh", "-c", "echo out; echo err >&2"]), log, 10)
    assert outcome.status == "ok"
    assert sorted(log.getvalue().split()) == [b"err", b"out"]


def test_timeout_kills_the_whole_process_group(target, tmp_path):
    pids = tmp_path / "pids"
    # The leader ignores SIGTERM and leaves a background worker: both must go.
    script = f'trap "" TERM; sleep 300 & echo $$ $! > "{pids}"; wait'
    started = time.monotonic()
    outcome = target.run(Invocation(["sh", "-c", script]), io.BytesIO(), 1.0)
    assert outcome.status == "timeout"
    assert "1 s" in outcome.message
    assert time.monotonic() - started < 10
    leader, worker = (int(p) for p in pids.read_text().split())
    deadline = time.monotonic() + 5
    while (_alive(leader) or _alive(worker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(leader) and not _alive(worker)


def test_a_process_killed_by_a_signal_is_a_failure_naming_it(target):
    outcome = target.run(Invocation(["sh", "-c", "kill -9 $$"]), io.BytesIO(), 10)
    assert outcome.status == "failure"
    assert outcome.returncode == -signal.SIGKILL
    assert "SIGKILL" in outcome.message


def test_a_non_zero_exit_is_a_failure(target):
    outcome = target.run(Invocation(["sh", "-c", "exit 7"]), io.BytesIO(), 10)
    assert (outcome.status, outcome.returncode) == ("failure", 7)
    assert "status 7" in outcome.message


def test_a_missing_program_is_a_failure_written_into_the_log(target):
    log = io.BytesIO()
    outcome = target.run(Invocation(["/no/such/benchmark", "x"]), log, 10)
    assert outcome.status == "failure"
    assert "/no/such/benchmark" in outcome.message
    assert b"/no/such/benchmark" in log.getvalue()


def test_environment_layers_and_gpu_selection(target, monkeypatch):
    monkeypatch.setenv("DLBS_INHERITED", "from-parent")
    monkeypatch.setenv("DLBS_OVERRIDDEN", "from-parent")
    experiment = {"runtime.env.DLBS_OVERRIDDEN": "from-param", "runtime.env.DLBS_FLAG": True,
                  "exp.gpus": "1,3"}
    invocation = make_invocation(
        experiment,
        ["sh", "-c", 'echo "$DLBS_INHERITED|$DLBS_OVERRIDDEN|$DLBS_FLAG|$DLBS_RECIPE|'
                     '$CUDA_VISIBLE_DEVICES"'],
        env={"DLBS_RECIPE": "from-recipe"})
    log = io.BytesIO()
    assert target.run(invocation, log, 10).status == "ok"
    assert log.getvalue() == b"from-parent|from-param|true|from-recipe|1,3\n"
    log = io.BytesIO()
    cpu = Invocation(["sh", "-c", 'echo "[${CUDA_VISIBLE_DEVICES-unset}]"'])
    target.run(cpu, log, 10)
    assert log.getvalue() == b"[]\n"  # a CPU experiment sees no GPU


def test_runtime_launcher_prefixes_the_command(target, tmp_path):
    experiment = {"runtime.launcher": ["env DLBS_VIA_LAUNCHER='yes it is'"]}
    invocation = make_invocation(experiment, ["sh", "-c", 'echo "$DLBS_VIA_LAUNCHER"'])
    assert target.describe(invocation)["argv"][:2] == ["env", "DLBS_VIA_LAUNCHER=yes it is"]
    log = io.BytesIO()
    assert target.run(invocation, log, 10).status == "ok"
    assert log.getvalue() == b"yes it is\n"


def test_preflight_refuses_a_launcher_that_does_not_exist(target):
    missing = make_invocation({"exp.id": "e1", "runtime.launcher": "no-such-numactl -N 0"},
                              ["python3"])
    with pytest.raises(LaunchError, match="'no-such-numactl' not found .*experiment e1's "
                                          "command: runtime.launcher"):
        target.preflight([missing])
    target.preflight([make_invocation({"runtime.launcher": "env"}, ["true"]),
                      make_invocation({}, ["true"])])


def test_paths_with_spaces_work_everywhere(target, tmp_path):
    folder = tmp_path / "my bench dir"
    folder.mkdir()
    script = folder / "bench script.sh"
    script.write_text('echo "cwd=$(pwd)" "arg=$1"\n')
    log_path = folder / "exp log.log"
    with open(log_path, "wb") as log:
        outcome = target.run(Invocation(["sh", str(script), "data dir/with 'quote'"],
                                            workdir=str(folder)), log, 10)
    assert outcome.status == "ok"
    assert log_path.read_text() == f"cwd={folder} arg=data dir/with 'quote'\n"


def test_a_missing_working_directory_is_a_failure_naming_it(target, tmp_path):
    outcome = target.run(Invocation(["true"], workdir=str(tmp_path / "gone")),
                         io.BytesIO(), 10)
    assert outcome.status == "failure"
    assert "working directory" in outcome.message and "gone" in outcome.message


def test_ctrl_c_stops_the_child_and_returns_interrupted(target, tmp_path):
    marker = tmp_path / "started"
    script = f'touch "{marker}"; sleep 300'
    # Ctrl-C is pressed once the target waits for its child (on_start is called there): a
    # KeyboardInterrupt before that would escape into pytest and end the whole session.
    waiting = threading.Event()

    def press_ctrl_c() -> None:
        deadline = time.monotonic() + 60
        while not (waiting.is_set() and marker.exists()) and time.monotonic() < deadline:
            time.sleep(0.02)
        if waiting.is_set():  # else the run ends at its timeout, and the test fails
            os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c)
    presser.start()
    started = time.monotonic()
    outcome = target.run(Invocation(["sh", "-c", script]), io.BytesIO(), 60,
                         on_start=lambda pid: waiting.set())
    presser.join()
    assert outcome.status == "interrupted"
    assert time.monotonic() - started < 10


def test_on_start_gets_the_pid_of_the_running_benchmark(target, tmp_path):
    # The benchmark waits until the callback has looked at it: a process that had already
    # ended (a short sleep on a loaded machine) would show an empty command line.
    release = tmp_path / "release"
    os.mkfifo(release)
    script = f"read line < '{release}'"
    seen = {}

    def started(pid: int) -> None:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            seen["argv"] = cmdline.read().split(b"\0")[:3]
        seen["pid"] = pid
        with open(release, "w") as fifo:
            fifo.write("go\n")

    outcome = target.run(Invocation(["sh", "-c", script]), io.BytesIO(), 30, on_start=started)
    assert outcome.status == "ok"
    assert seen == {"argv": [b"sh", b"-c", script.encode()], "pid": outcome.details["pid"]}
