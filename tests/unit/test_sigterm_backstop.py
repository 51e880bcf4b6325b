"""SIGTERM ends a backend with one failure report, even where Python loses the exception.

`benchmark_common.termination` (used by the PyTorch, MXNet and ONNX Runtime backends): a
handler's exception raised inside a `__del__` is discarded by Python; the backstop reports it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"

SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[2])
    from benchmark_common.protocol import emit_failure
    from benchmark_common.termination import Termination

    class Interrupted(BaseException):
        pass

    termination = Termination(Interrupted, lambda error: emit_failure(f"backstop: {error}"),
                              grace_s=0.5)
    termination.install()

    class Swallower:
        announced = False

        def __del__(self):
            if not Swallower.announced:  # ready once the loop runs, never before it
                Swallower.announced = True
                print("ready", flush=True)
            time.sleep(0.05)  # the handler runs here; Python ignores what it raises

    try:
        if sys.argv[1] == "lost":
            while True:
                Swallower()
        elif sys.argv[1] == "slow":
            try:
                print("ready", flush=True)
                while True:
                    time.sleep(0.05)
            finally:
                time.sleep(5)  # much longer than the grace: the backstop reports first
        else:
            print("ready", flush=True)
            while True:
                time.sleep(0.05)
    except Interrupted as error:
        termination.claim()
        emit_failure(f"main: {error}")
        time.sleep(1.5)  # longer than the grace: the backstop must stay quiet
        sys.exit(1)
""")


def _terminate(mode: str) -> tuple[int, str, str]:
    with subprocess.Popen([sys.executable, "-c", SCRIPT, mode, str(PYTHON_DIR)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            assert process.stdout.readline() == "ready\n"
            process.send_signal(signal.SIGTERM)
            stdout, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
            process.wait()
    return process.returncode, stdout, stderr


def _status_messages(stdout: str) -> list[str]:
    prefix = "__results.status_msg__="
    return [line[len(prefix):] for line in stdout.splitlines() if line.startswith(prefix)]


def test_an_exception_lost_in_a_finalizer_is_reported_by_the_backstop():
    returncode, stdout, stderr = _terminate("lost")
    assert returncode == 1
    assert "Exception ignored" in stderr
    assert "was lost where Python could not pass it on" in stderr
    assert _status_messages(stdout) == ['"backstop: terminated by signal 15"']
    assert '__results.status__="failure"' in stdout


def test_an_exception_that_reaches_main_is_reported_once_by_main():
    returncode, stdout, stderr = _terminate("main")
    assert returncode == 1
    assert _status_messages(stdout) == ['"main: terminated by signal 15"']
    assert "lost" not in stderr


def test_main_that_is_slower_than_the_grace_leaves_the_report_to_the_backstop():
    returncode, stdout, _ = _terminate("slow")
    assert returncode == 1
    assert _status_messages(stdout) == ['"backstop: terminated by signal 15"']
