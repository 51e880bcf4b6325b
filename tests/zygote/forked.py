"""Run a script in a forked child of an interpreter that imported a framework (standard library).

What `python script.py args` would do, in a process that already holds the modules: the
`__main__` module as the interpreter makes it, `sys.argv`, `sys.path` as a script's (its folder
first, then PYTHONPATH, then the site), the environment and working directory, stdout and
stderr buffered as PYTHONUNBUFFERED says, and at the end what the interpreter does at its exit
(threads joined, atexit run, streams flushed) and the exit status of `sys.exit`, an uncaught
exception or KeyboardInterrupt (which ends it by SIGINT, as Ctrl-C would have).

Used by both fork servers of the tests: tests/preloaded.py (a test's direct backend runs) and
tests/zygote/server.py (the backends that `dlbs run` starts; tests/zygote/sitecustomize.py).
The caller has made fds 0, 1 and 2 the run's; `become` never returns.
"""

from __future__ import annotations

import atexit
import builtins
import importlib.machinery
import io
import os
import signal
import sys
import tempfile
import threading
import traceback
import types


def _stream(fd: int, unbuffered: bool, line_buffering: bool, errors: str) -> io.TextIOWrapper:
    raw = io.FileIO(fd, "w", closefd=False)
    if unbuffered:
        return io.TextIOWrapper(raw, encoding="utf-8", errors=errors, write_through=True)
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", errors=errors,
                            line_buffering=line_buffering)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _pythonpath(env: dict[str, str] | os._Environ[str]) -> list[str]:
    return [os.path.abspath(part) for part in env.get("PYTHONPATH", "").split(os.pathsep)
            if part]


def site_of_this_interpreter() -> list[str]:
    """The running server's `sys.path` after its first entry, less its PYTHONPATH's entries."""
    own = set(_pythonpath(os.environ))
    return [entry for entry in sys.path[1:] if entry not in own]


def script_path(script: str, env: dict[str, str], site: list[str]) -> list[str]:
    """A script's `sys.path`: its folder, the entries of its PYTHONPATH, then `site`."""
    return [os.path.dirname(os.path.abspath(script)), *_pythonpath(env), *site]


def become(argv: list[str], env: dict[str, str], cwd: str, site: list[str]) -> None:
    """Run `argv[0]` as `__main__` with `argv`, in `env` and `cwd`; exits the process."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # from TMPDIR as the run's environment says
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = sys.__stdout__ = _stream(1, unbuffered, False, "strict")
    sys.stderr = sys.__stderr__ = _stream(2, unbuffered, True, "backslashreplace")
    script = argv[0]
    sys.argv = list(argv)
    sys.path[:] = script_path(script, env, site)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=script, __cached__=None, __package__=None, __spec__=None,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", script),
                         __builtins__=builtins)
    sys.modules["__main__"] = main
    status, interrupted = 0, False
    try:
        with open(script, "rb") as source:
            code = compile(source.read(), script, "exec")
        exec(code, main.__dict__)
    except SystemExit as stop:
        status = _exit_status(stop.code)
    except BaseException as error:  # the script's frames, not this function's
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        status, interrupted = 1, isinstance(error, KeyboardInterrupt)
    try:  # what the interpreter does at its exit: join threads, run atexit, flush
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        if interrupted:  # then it ends by SIGINT, as Ctrl-C would have ended it
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(status)
