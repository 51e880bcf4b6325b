"""The small pieces recipes and invocations are made of: mounts, argument tokens, labels.

Apart from `invocation.py`, whose dataclasses cost every process that imports them the
compilation of their methods (about 11 million instructions): what makes a plan (the
recipes' Docker flags, `dlbs.recipes.host_access`) needs only these. `invocation.py`
re-exports them.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from dlbs.errors import LaunchError
from dlbs.util.records import FrozenRecord


class Mount(FrozenRecord):
    """A host folder or file made visible inside a container at `container`."""

    __slots__ = ("host", "container", "read_only")

    def __init__(self, host: str, container: str, read_only: bool = False) -> None:
        self.host = host
        self.container = container
        self.read_only = read_only


def tokens(value: object, name: str) -> list[str]:
    """An argument-list parameter (`exp.docker_args`, `runtime.launcher`, ...) as tokens.

    Each item of a list is split as a POSIX shell splits words (quotes respected; nothing is
    evaluated), so `["--shm-size=1g --ipc=host", "-v '/a b:/data'"]` gives four tokens; a
    plain string is split the same way; None and "" give no tokens.
    """
    if value is None or value == "":
        return []
    items = value if isinstance(value, list | tuple) else [value]
    result: list[str] = []
    for item in items:
        if not isinstance(item, str):
            item = str(item)
        try:
            result.extend(shlex.split(item))
        except ValueError as error:
            raise LaunchError(f"{name}: cannot split {item!r} into arguments: {error}",
                              hint="close the quote, or escape it") from error
    return result


def experiment_label(experiment: Mapping[str, Any]) -> str:
    """A short name of an experiment for messages: its id, else its log file."""
    return str(experiment.get("exp.id") or experiment.get("exp.log_file") or "<experiment>")
