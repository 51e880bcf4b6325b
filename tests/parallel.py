"""How the suite shares the machine between pytest-xdist workers (tests/conftest.py).

scripts/test.sh runs `pytest -n 3 --dist loadgroup`; each test is free to run on any worker
beside the others, except:
- tests of the shared services (Docker, Podman, SLURM: by marker or by the fixture they
  take) run one after another on one worker, and are handed out first: the SLURM cluster
  has two nodes, whose jobs' timing some tests measure, and some Docker tests check that
  the engine holds no container of theirs, which another test's would be;
- tests that take a module-scoped fixture run on one worker, so that the fixture (a traced
  model, trained weights, real runs) is made once, not once per worker;
- the biggest pieces of work are handed out first (`order`);
- tests marked `serial` measure time or CPU use: they run last, one after another, each with
  no other test beside it. Every test holds a lock that all workers share, ordinary tests in
  shared mode and serial ones exclusively, behind a gate that stops new tests from starting
  while a serial one waits for the running ones to end.
Without xdist (`-n 0`, or plain `pytest`) the tests and their order are the same, with no
lock.

pytest 9 took away the way pytest-xdist 3.8 put a test's group into its node id, so the
workers write their groups into a file of the run (`write_groups`) and the controller's
scheduler (`GroupScheduling`) reads them from there.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests import runs

SERVICES_GROUP = "services"
SERIAL_GROUP = "serial"
_SERVICE_MARKERS = ("docker", "slurm")
_SERVICE_FIXTURES = ("docker_client", "test_image", "podman_image", "slurm_cluster")
_SHARED_SCOPES = ("module", "class", "package")


def group_of(item: pytest.Item) -> str | None:
    """The group an item runs in (one worker, one test after another), or None: any worker."""
    if item.get_closest_marker("serial"):
        return SERIAL_GROUP
    fixtures = getattr(item, "fixturenames", ())
    if any(item.get_closest_marker(name) for name in _SERVICE_MARKERS) or \
            any(name in fixtures for name in _SERVICE_FIXTURES):
        return SERVICES_GROUP
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs if info is not None else {}
    for name in fixtures:
        found = definitions.get(name)
        if found and found[-1].scope in _SHARED_SCOPES:
            return item.nodeid.split("::")[0]
    return None


#: Markers of tests that start frameworks (seconds each), handed out before the other free ones.
_HEAVY_MARKERS = ("slow", "pytorch", "mxnet", "onnxruntime")


def order(items: list[pytest.Item]) -> dict[str, str]:
    """Hand out the biggest pieces of work first; returns each grouped test's group.

    Service tests first, then the other groups (each one piece that one worker runs from
    start to end: a group handed out last made the whole suite wait for it), then the free
    tests that start frameworks, then the rest (small pieces that fill the gaps at the end),
    serial tests last. The sort is stable: collection order within each rank.
    """
    groups = {item.nodeid: group for item in items if (group := group_of(item)) is not None}

    def rank(item: pytest.Item) -> int:
        group = groups.get(item.nodeid)
        if group is not None:
            return {SERVICES_GROUP: 0, SERIAL_GROUP: 4}.get(group, 1)
        return 2 if any(item.get_closest_marker(name) for name in _HEAVY_MARKERS) else 3

    items.sort(key=rank)
    return groups


# -- the run's folder: the lock, the groups --------------------------------------------------
def name_the_run(config: pytest.Config) -> None:
    """On the controller: the run's id that the workers share is the run's name (tests/runs.py)."""
    if _is_controller(config) and config.getoption("testrunuid", None) is None:
        config.option.testrunuid = runs.name()


def _is_controller(config: pytest.Config) -> bool:
    return getattr(config, "workerinput", None) is None and \
        config.pluginmanager.has_plugin("xdist")


def _run_folder() -> Path:
    return runs.folder()


def _in_a_worker() -> bool:
    return bool(os.environ.get("PYTEST_XDIST_WORKER"))


def write_groups(groups: dict[str, str]) -> None:
    """In a worker: the groups of its collection, for the controller's scheduler."""
    if not _in_a_worker():
        return
    folder = _run_folder()
    worker = os.environ["PYTEST_XDIST_WORKER"]
    partial = folder / f"groups-{worker}.part"
    partial.write_text(json.dumps(groups))
    partial.replace(folder / f"groups-{worker}.json")


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`: GroupScheduling; anything else: xdist's own."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """xdist's scope scheduling, with the groups the workers wrote, in collection order."""

        def __init__(self, config: pytest.Config, log: Any) -> None:
            super().__init__(config, log)
            self._groups: dict[str, str] | None = None

        def schedule(self) -> None:
            self.config.option.loadscopereorder = False  # services first, serial last
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                found = sorted(_run_folder().glob("groups-*.json"))
                self._groups = json.loads(found[0].read_text()) if found else {}
            return self._groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)


# -- tests that run alone ----------------------------------------------------------------------
class Turns:
    """A worker's side of the lock all workers share (see the module doc)."""

    def __init__(self) -> None:
        folder = _run_folder()
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        self._lock = os.open(folder / "lock", flags, 0o600)
        self._gate = os.open(folder / "gate", flags, 0o600)

    @contextmanager
    def turn(self, alone: bool) -> Iterator[None]:
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(self._gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(self._gate, fcntl.LOCK_UN)


_turns: list[Turns] = []


def turns() -> Turns | None:
    """The Turns of this worker; None outside an xdist worker."""
    if not _in_a_worker():
        return None
    if not _turns:
        _turns.append(Turns())
    return _turns[0]
