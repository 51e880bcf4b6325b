"""tests/preloaded.py: a forked run is what `python script.py args` would have been."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.preloaded import PreloadedPython

SCRIPT = r'''
import os, signal, sys, threading, atexit, time
print("argv", sys.argv[1:], "path0", sys.path[0], "name", __name__, "package", __package__)
print("cwd", os.getcwd(), "X", os.environ.get("X"), "sqlite3", "sqlite3" in sys.modules)
print("to stderr", file=sys.stderr)
what = sys.argv[1]
if what == "exit3":
    sys.exit(3)
if what == "exit-text":
    sys.exit("stopped: a reason")
if what == "raise":
    raise ValueError("boom")
if what == "sigterm":
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGTERM)
if what == "interrupt":
    raise KeyboardInterrupt
if what == "atexit":
    atexit.register(lambda: print("atexit ran"))
    threading.Thread(target=lambda: (time.sleep(0.2), print("thread joined"))).start()
if what == "sleep":
    print("sleeping", flush=True)
    time.sleep(60)
'''


@pytest.fixture(scope="module")
def preloaded():
    runner = PreloadedPython(["sqlite3"])  # small, and one that SCRIPT does not import
    yield runner
    runner.close()


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    return path


def environment() -> dict[str, str]:
    """The environment of every run here (the server's: another one is not forked)."""
    return dict(os.environ, X="1", PYTHONUNBUFFERED="1")


def fresh(argv, env, cwd):
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=60)


@pytest.mark.parametrize("what", ["ok", "exit3", "exit-text", "raise", "sigterm", "interrupt",
                                  "atexit"])
def test_a_forked_run_ends_and_prints_as_a_fresh_interpreter_does(preloaded, script, tmp_path,
                                                                  what):
    env = environment()
    forked = preloaded.run([str(script), what], env, cwd=tmp_path, timeout=60)
    expected = fresh([str(script), what], env, tmp_path)
    assert forked.returncode == expected.returncode
    # The one difference: what the server had imported before the run.
    assert forked.stdout == expected.stdout.replace("sqlite3 False", "sqlite3 True")
    # A traceback has runpy's frames in a forked run; its last line is the same.
    assert forked.stderr.splitlines()[:1] == expected.stderr.splitlines()[:1]
    assert forked.stderr.splitlines()[-1:] == expected.stderr.splitlines()[-1:]


def test_a_run_past_its_timeout_is_killed(preloaded, script, tmp_path):
    env = environment()
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        preloaded.run([str(script), "sleep"], env, cwd=tmp_path, timeout=1)
    assert "sleeping" in raised.value.output
    # The server goes on: the next run is forked as before.
    assert preloaded.run([str(script), "ok"], env, cwd=tmp_path, timeout=60).returncode == 0


def test_another_environment_gets_a_fresh_interpreter(preloaded, script, tmp_path):
    env = environment()
    assert "sqlite3 True" in preloaded.run([str(script), "ok"], env, cwd=tmp_path,
                                           timeout=60).stdout
    other = preloaded.run([str(script), "ok"], dict(env, OMP_NUM_THREADS="3"), cwd=tmp_path,
                          timeout=60)
    assert "sqlite3 False" in other.stdout  # not forked from the server that imported it


def test_a_command_line_of_interpreter_options_gets_a_fresh_interpreter(preloaded, tmp_path):
    # `-m` (a launcher such as torchrun) and `-c` name no script to run in the forked child.
    shown = "import sys; print(sys.argv[0], 'sqlite3' in sys.modules)"
    run = preloaded.run(["-c", shown], environment(), cwd=tmp_path, timeout=60)
    assert (run.returncode, run.stdout) == (0, "-c False\n")
