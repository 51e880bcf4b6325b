"""Backend flags that `<framework>.extra_args` repeats (`dlbs validate`, `dlbs run`).

Every flag of a backend has a declared parameter that `<framework>.args` renders (see
docs/backends/). A flag given again in `<framework>.extra_args` would win or lose against
that parameter depending on the backend's parser, and the report could not tell the two
experiments apart by their parameters; so a repeated flag is a problem of the plan, named
with the parameter to set instead.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Mapping
from typing import Any

_FLAG = re.compile(r"--[A-Za-z][A-Za-z0-9_-]*")
_REFERENCE = re.compile(r"\$[{<]([^${}<>()]+)[}>]")


def flag_names(items: Any) -> list[str]:
    """The `--flag` names in an argument list, in order (`--a=1` gives `--a`)."""
    if items is None or items == "":
        return []
    words: list[str] = []
    for item in items if isinstance(items, list) else [items]:
        try:
            words.extend(shlex.split(str(item)))
        except ValueError:
            words.extend(str(item).split())
    return [word.partition("=")[0] for word in words if _FLAG.fullmatch(word.partition("=")[0])]


def flag_parameters(args_template: Any) -> dict[str, str]:
    """For each flag that a raw `<framework>.args` item starts with, the parameter it renders.

    `"--compile ${pytorch.compile}"` maps `--compile` to `pytorch.compile`; an item without
    a reference (or one that is not a string) maps nothing.
    """
    found: dict[str, str] = {}
    for item in args_template if isinstance(args_template, list) else []:
        if not isinstance(item, str):
            continue
        flag, _, rest = item.strip().partition(" ")
        reference = _REFERENCE.search(rest)
        if _FLAG.fullmatch(flag) and reference:
            found.setdefault(flag, reference.group(1))
    return found


def repeated_flags(experiment: Mapping[str, Any], framework: str,
                   args_template: Any = None) -> list[str]:
    """One message per flag of `<framework>.extra_args` that the rendered args hold twice."""
    extra_name, args_name = f"{framework}.extra_args", f"{framework}.args"
    extra = Counter(flag_names(experiment.get(extra_name)))
    if not extra:
        return []
    rendered = Counter(flag_names(experiment.get(args_name)))
    parameters = flag_parameters(args_template)
    messages = []
    for flag, times in extra.items():
        if rendered[flag] > times and flag in parameters:
            messages.append(f"{extra_name} repeats {flag}, which {args_name} already sets "
                            f"from {parameters[flag]}: set {parameters[flag]} instead")
        elif rendered[flag] > times:
            messages.append(f"{extra_name} repeats {flag}, which {args_name} already sets")
        elif times > 1:
            messages.append(f"{extra_name} gives {flag} {times} times")
    return messages
