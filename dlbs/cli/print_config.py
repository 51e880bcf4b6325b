"""`dlbs print-config`: the merged spec, after defaults, includes and CLI overrides.

A `postgresql://` URL's password is left out wherever the spec holds one (docs/security.md).
"""

from __future__ import annotations

import argparse
import io
import sys

import orjson

from dlbs.cli.spec_options import add_spec_arguments, spec_from_args
from dlbs.util.credentials import masked


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_spec_arguments(parser)
    parser.add_argument("--format", choices=("json", "yaml"), default="json")


def run(args: argparse.Namespace) -> int:
    document = masked(spec_from_args(args).to_document())
    if args.format == "json":
        sys.stdout.buffer.write(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        from ruamel.yaml import YAML

        yaml = YAML(typ="safe", pure=True)
        yaml.default_flow_style = False
        buffer = io.StringIO()
        yaml.dump(document, buffer)
        sys.stdout.write(buffer.getvalue())
    return 0
