"""`dlbs help`: parameter documentation from the default configs (and a spec, if given)."""

from __future__ import annotations

import argparse
import re
import textwrap

from dlbs.cli.spec_options import add_spec_arguments, spec_from_args
from dlbs.config.values import render
from dlbs.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", dest="name_regex", metavar="REGEX",
                        help="parameters whose name matches")
    parser.add_argument("--text", dest="text_regex", metavar="REGEX",
                        help="parameters whose description matches")
    add_spec_arguments(parser)


def _compile(pattern: str | None, flag: str) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as error:
        raise ConfigError(f"{flag} {pattern!r} is not a valid regular expression: {error}") \
            from None


def run(args: argparse.Namespace) -> int:
    names = _compile(args.name_regex, "--params")
    text = _compile(args.text_regex, "--text")
    found = 0
    for name, definition in spec_from_args(args).params.items():
        if names is not None and not names.search(name):
            continue
        if text is not None and not text.search(definition.desc):
            continue
        found += 1
        value = definition.value
        shown = "null" if value is None else (render(value) if not isinstance(value, str)
                                              else repr(value))
        print(f"{name}  ({definition.type or 'any'}, default {shown})")
        if definition.choices is not None:
            print(f"    choices: {', '.join(render(c) or repr(c) for c in definition.choices)}")
        if definition.desc:
            print(textwrap.fill(definition.desc, 96, initial_indent="    ",
                                subsequent_indent="    "))
    if not found:
        raise ConfigError("no parameter matches", hint="try a wider --params or --text regex")
    return 0
