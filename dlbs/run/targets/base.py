"""The target interface and the registry of targets.

A target reads only the `Invocation` a recipe built (`dlbs.recipes`), never an experiment's
raw parameters. Two kinds of target share `preflight` and `describe`:
- a `ProcessTarget` (local, docker) runs an invocation to the end in `run`, streaming its
  output into the experiment's log, and tags what it starts with the attempt's token, so
  that after a `kill -9` of dlbs the next run finds and stops it (`stop_leftovers`);
- a `SchedulerTarget` (slurm; `dlbs.run.targets.scheduler`) submits invocations and returns
  job ids at once, then polls them, so that a run loop that crashed can re-attach to a queued
  or running job by its id instead of submitting it twice.
The run loop finds a target by the name its invocation gives (`get_target`), and opens one
instance of each per sweep (`OpenTargets`).
"""

from __future__ import annotations

import abc
import importlib
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, BinaryIO, ClassVar, TypeVar

from dlbs.errors import LaunchError
from dlbs.recipes.invocation import Invocation
from dlbs.run.outcome import Outcome

#: Called with the host PID of a started benchmark's process tree.
OnStart = Callable[[int], None]

#: The built-in targets and the modules that define them. A module is imported when its
#: target is first asked for (all of them to list them): the Docker SDK and Jinja2 that
#: `docker` and `slurm` import would cost every bare-metal `dlbs run` about 0.1 s of start-up.
BUILTIN_TARGETS = {"local": "dlbs.run.targets.local", "docker": "dlbs.run.targets.docker",
                   "slurm": "dlbs.run.targets.slurm"}
BUILTIN_MODULES = tuple(BUILTIN_TARGETS.values())


class Target(abc.ABC):
    """Where an experiment runs. Subclasses set `name` through `@register_target`."""

    name: ClassVar[str] = ""
    #: Why this target cannot be used in this installation (a missing Python package), or None.
    unavailable: ClassVar[str | None] = None
    #: One line for `dlbs list targets`.
    summary: ClassVar[str] = ""

    @abc.abstractmethod
    def preflight(self, invocations: Sequence[Invocation]) -> None:
        """Check, before anything runs, that every given invocation can be started here.

        Raises `LaunchError` with one clear line (daemon down, image missing, scheduler
        unreachable, a program not found) naming the thing and the experiment.
        """

    @abc.abstractmethod
    def describe(self, invocation: Invocation) -> dict[str, Any]:
        """The exact request this target would make, as JSON-ready data (for --dry-run)."""

    def close(self) -> None:
        """Release what the target holds (a daemon connection); the run loop calls it last."""
        return None


class ProcessTarget(Target):
    """A target that runs an invocation to its end and streams its output into a log."""

    @abc.abstractmethod
    def run(self, invocation: Invocation, log: BinaryIO, timeout: float | None, *,
            on_start: OnStart | None = None, stop: threading.Event | None = None,
            token: str | None = None) -> Outcome:
        """Run the invocation; its stdout and stderr go into `log` as they come.

        `timeout` (seconds; None or 0 = no limit) ends it with status timeout. A
        KeyboardInterrupt, or `stop` being set (from another thread: the run loop runs
        targets in worker threads), stops it and returns status interrupted: the exception is
        not re-raised, the caller stops the sweep when it sees that status. When `stop` is a
        `dlbs.run.interrupts.StopEvent`, its `forced` being set cuts the grace period of
        that stop short. Raises `LaunchError` only when the experiment could not be started
        at all (the environment's fault). `on_start(pid)`, when given, is called once the
        benchmark runs, with the host PID of the root of its process tree (for the resource
        monitor and the attempt's mark). `token`, when given, is unique to the attempt: what
        the target starts carries it (`dlbs.run.marks`), for `stop_leftovers`.
        """

    @abc.abstractmethod
    def stop_leftovers(self, invocation: Invocation, mark: Mapping[str, Any]) -> list[str]:
        """Stop what an attempt of a `dlbs run` that died still runs; describe what it stopped.

        `mark` is the attempt's mark (`dlbs.run.marks`): its token, host and boot, and the
        pid and start time of the process tree's root once it ran. `invocation` is the
        attempt's, rebuilt from its recorded parameters. Nothing found is an empty list;
        `LaunchError` when it cannot be looked for (an engine that does not answer, another
        host).
        """


_REGISTRY: dict[str, type[Target]] = {}
_builtins_loaded = False
T = TypeVar("T", bound=type[Target])


def register_target(name: str, *, unavailable: str | None = None) -> Callable[[T], T]:
    """Class decorator: make a `Target` subclass selectable by `name`.

    `unavailable` is the reason the target cannot be used here (a dependency failed to
    import); it still registers, and selecting it raises `LaunchError` with that reason.
    """

    def decorate(cls: T) -> T:
        if name in _REGISTRY:
            raise ValueError(f"execution target {name!r} is already registered "
                             f"by {_REGISTRY[name].__module__}.{_REGISTRY[name].__qualname__}")
        cls.name = name
        cls.unavailable = unavailable
        _REGISTRY[name] = cls
        return cls

    return decorate


def _load_builtins(name: str | None = None) -> None:
    """Import the module of the built-in target `name`, or of every built-in (None)."""
    global _builtins_loaded
    if name in _REGISTRY or _builtins_loaded:
        return
    if name in BUILTIN_TARGETS:
        importlib.import_module(BUILTIN_TARGETS[name])
        return
    _builtins_loaded = True
    for module in BUILTIN_MODULES:
        importlib.import_module(module)


def targets() -> dict[str, type[Target]]:
    """Every registered target by name (usable or not: see each class's `unavailable`)."""
    _load_builtins()
    return dict(sorted(_REGISTRY.items()))


def get_target(name: str) -> Target:
    """A new instance of the target `name`; `LaunchError` if unknown or unusable here."""
    _load_builtins(name)
    cls = _REGISTRY.get(name)
    if cls is None:
        _load_builtins()  # every name, for the hint
        raise LaunchError(f"unknown execution target {name!r}",
                          hint=f"known targets: {', '.join(sorted(_REGISTRY))}")
    if cls.unavailable:
        raise LaunchError(f"execution target {name!r} cannot be used here: {cls.unavailable}")
    return cls()


class OpenTargets:
    """The targets a sweep uses: one instance each, opened when first asked for, closed last."""

    def __init__(self) -> None:
        self._open: dict[str, Target] = {}

    def get(self, name: str) -> Target:
        """The sweep's instance of target `name`; `LaunchError` as `get_target` raises it."""
        if name not in self._open:
            self._open[name] = get_target(name)
        return self._open[name]

    def close(self) -> None:
        """Release what every opened target holds."""
        for target in self._open.values():
            target.close()
