"""The spec options that plan, validate, print-config and run share."""

from __future__ import annotations

import argparse

from dlbs.config.loader import load_spec
from dlbs.config.spec import Spec
from dlbs.errors import ConfigError


def add_spec_arguments(parser: argparse.ArgumentParser, config_required: bool = False) -> None:
    parser.add_argument("spec", nargs="?", metavar="SPEC",
                        help="experiment spec (.json, .yaml or .yml); the same as -c SPEC")
    parser.add_argument("--config", "-c", metavar="FILE", required=config_required,
                        help="experiment spec (.json, .yaml or .yml)")
    parser.add_argument("-P", dest="params", action="append", default=[], metavar="NAME=VALUE",
                        help="set a parameter (VALUE is JSON when it parses as JSON)")
    parser.add_argument("-V", dest="variables", action="append", default=[],
                        metavar="NAME=LIST", help="set or add a sweep axis (a JSON list)")
    parser.add_argument("-E", dest="extensions", action="append", default=[], metavar="JSON",
                        help="append an extension (a JSON object)")
    parser.add_argument("--no-defaults", "--discard-default-config", dest="no_defaults",
                        action="store_true", help="load no default config")


def spec_file(args: argparse.Namespace) -> str | None:
    """The spec file: `SPEC` or `-c FILE` (DLBS's option); both at once is an error."""
    positional = getattr(args, "spec", None)
    if positional is not None and args.config is not None:
        raise ConfigError(f"two specs: {positional!r} and -c {args.config!r}",
                          hint="give the spec once, as SPEC or as -c SPEC")
    return positional if positional is not None else args.config


def spec_from_args(args: argparse.Namespace) -> Spec:
    """The merged spec; a name in dlbs's namespaces that no config declares is refused."""
    from dlbs.plan.unused import refuse_undeclared

    spec = load_spec(spec_file(args), defaults=not args.no_defaults, params=args.params,
                     variables=args.variables, extensions=args.extensions)
    refuse_undeclared(spec)
    return spec
