"""Shared fixtures. Service fixtures (Docker, SLURM) live beside the tests that need them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import parallel, runs, zygotes

REPO = Path(__file__).resolve().parents[1]

# The suite runs more framework processes than the machine has cores. OpenMP's threads (PyTorch's
# CPU operators) spin while they wait for work by default, burning the CPU that the other
# workers' processes need: three PyTorch trainings at once on two cores took 16-21 CPU-s each,
# and 10-11 with passive waiting (wall 25-30 s -> 17 s). Every process the suite starts
# inherits this; what the tests check does not depend on it (benchmarks measure in bench/). A
# value the developer set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# The fuzz suite's budget: seconds per target (tests/fuzz). One knob: `--fuzz-seconds`, or
# DLBS_FUZZ_SECONDS in the environment (CI's default stays 15).
FUZZ_SECONDS = 15.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fuzz-seconds", type=float, metavar="S",
                     default=float(os.environ.get("DLBS_FUZZ_SECONDS", FUZZ_SECONDS)),
                     help=f"seconds each fuzz target runs (default: $DLBS_FUZZ_SECONDS, else "
                          f"{FUZZ_SECONDS:g})")


@pytest.fixture(scope="session")
def fuzz_seconds(request: pytest.FixtureRequest) -> float:
    """The fuzz budget per target (`--fuzz-seconds`)."""
    return request.config.getoption("--fuzz-seconds")


# The suite on pytest-xdist workers: groups, their order, tests that run alone
# (tests/parallel.py).
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    parallel.write_groups(parallel.order(items))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return parallel.make_scheduler(config, log)


# Each run of the suite has its own name, folder, TMPDIR, PostgreSQL database, and removes
# what crashed runs left (tests/runs.py). First: pytest's basetemp is the run's.
@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    runs.begin(config)
    parallel.name_the_run(config)
    zygotes.activate(config)  # the backends of `dlbs run` fork from a server (tests/zygotes.py)
    # A shell starts a background job (`pytest ... &`) with SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler: the tests of Ctrl-C would wait for their
    # timeouts. They need the handler an interactive pytest has.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def backend_servers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork servers this test's backends may use (tests/zygotes.py)."""
    zygotes.for_test(request.node, monkeypatch)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    runs.note_exit_status(session, exitstatus)


def pytest_unconfigure(config: pytest.Config) -> None:
    runs.end(config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    turns = parallel.turns()
    if turns is None:
        return (yield)
    with turns.turn(alone=item.get_closest_marker("serial") is not None):
        return (yield)


# What a child process inherits of the test process's signals: ignored dispositions and the
# blocked mask survive exec. A test that leaves SIGTERM ignored or blocked (or a handler of its
# own in place) changes every later test of its worker: a process it starts cannot be stopped
# with SIGTERM. Each test must leave them as it found them.
_WATCHED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _signal_state() -> tuple[object, ...]:
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return (*(signal.getsignal(number) for number in _WATCHED_SIGNALS),
            frozenset(number for number in blocked if number in _WATCHED_SIGNALS))


@pytest.fixture(autouse=True)
def _signals_left_as_found() -> Iterator[None]:
    before = _signal_state()
    yield
    after = _signal_state()
    if after != before:
        for number, handler in zip(_WATCHED_SIGNALS, before):
            signal.signal(number, handler)  # type: ignore[arg-type]
        blocked_before: frozenset[int] = before[-1]  # type: ignore[assignment]
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(_WATCHED_SIGNALS) - blocked_before)
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked_before)
        pytest.fail(f"the test changed the process's signal state: {before} -> {after}",
                    pytrace=False)


@pytest.fixture
def dlbs_cli():
    """Run `dlbs` as a subprocess; returns the CompletedProcess (text mode)."""

    def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        full_env = dict(os.environ)
        full_env.update(env or {})
        return subprocess.run([sys.executable, "-m", "dlbs.cli.main", *args], cwd=cwd or REPO,
                              env=full_env, capture_output=True, text=True, timeout=timeout)

    return run


# Property tests are judged on what they find, not on how fast a loaded 2-core CI machine
# runs them: no per-example deadline.
from hypothesis import settings  # noqa: E402

settings.register_profile("dlbs", deadline=None)
settings.load_profile("dlbs")
