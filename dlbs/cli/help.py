"""`dlbs help`: parameter documentation from the default configs (and a spec, if given)."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from dlbs.cli.spec_options import add_spec_arguments, spec_from_args
from dlbs.config.limits import EXPRESSION_SECONDS
from dlbs.config.patterns import IGNORECASE, compile_pattern, too_slow
from dlbs.config.values import render
from dlbs.errors import ConfigError
from dlbs.util.terminal import one_line, visible


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", dest="name_regex", metavar="REGEX",
                        help="parameters whose name matches")
    parser.add_argument("--text", dest="text_regex", metavar="REGEX",
                        help="parameters whose description matches")
    add_spec_arguments(parser)


def _compile(pattern: str | None, flag: str) -> Any:
    if pattern is None:
        return None
    try:
        return compile_pattern(pattern, IGNORECASE)
    except ConfigError as error:
        reason = error.message.rpartition(": ")[2]
        raise ConfigError(f"{flag} {pattern!r} is not a valid regular expression: {reason}") \
            from None


def _search(pattern: Any, text: str, flag: str) -> bool:
    """A search within the regular expressions' time budget (docs/security.md)."""
    try:
        return pattern.search(text, timeout=EXPRESSION_SECONDS) is not None
    except TimeoutError:
        raise ConfigError(f"{flag}: {too_slow(pattern, text, EXPRESSION_SECONDS).message}") \
            from None


def run(args: argparse.Namespace) -> int:
    names = _compile(args.name_regex, "--params")
    text = _compile(args.text_regex, "--text")
    found = 0
    for name, definition in spec_from_args(args).params.items():
        if names is not None and not _search(names, name, "--params"):
            continue
        if text is not None and not _search(text, definition.desc, "--text"):
            continue
        found += 1
        value = definition.value
        shown = "null" if value is None else (render(value) if not isinstance(value, str)
                                              else repr(value))
        print(one_line(f"{name}  ({definition.type or 'any'}, default {shown})"))
        if definition.choices is not None:
            print(one_line(f"    choices: "
                           f"{', '.join(render(c) or repr(c) for c in definition.choices)}"))
        if definition.minimum is not None or definition.maximum is not None:
            low = "" if definition.minimum is None else render(definition.minimum)
            high = "" if definition.maximum is None else render(definition.maximum)
            print(f"    range: {low} .. {high}".rstrip())
        if definition.desc:
            print(visible(textwrap.fill(definition.desc, 96, initial_indent="    ",
                                        subsequent_indent="    ")))
    if not found:
        raise ConfigError("no parameter matches", hint="try a wider --params or --text regex")
    return 0
