"""`dlbs plan`: print or write the resolved plan.

A plan never holds the password of a `postgresql://` runtime.results_db, on the terminal or
in a file (dlbs/util/credentials.py): a plan is shared, committed and copied to other
hosts; `dlbs run --plan FILE` takes the password from PGPASSFILE or PGPASSWORD, as libpq
does for a URL without one (docs/security.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

from dlbs.cli.spec_options import add_spec_arguments, spec_from_args
from dlbs.errors import DlbsError
from dlbs.plan.builder import ID, Planner
from dlbs.plan.unused import unused_parameters
from dlbs.plan.writers import FORMATS, write_plan
from dlbs.recipes.host_access import HostAccessWatch
from dlbs.util.credentials import ExperimentMask
from dlbs.util.gc import no_cyclic_gc
from dlbs.util.terminal import one_line

# A document (json, csv, table) is held here until the whole plan has resolved, so that a
# failure leaves stdout empty; beyond this size it waits in a temporary file, not in memory.
SPOOL_IN_MEMORY = 64 * 2**20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_spec_arguments(parser)
    parser.add_argument("--format", choices=FORMATS, default="json",
                        help="json: one list; jsonl: one experiment a line, streamed as it "
                             "resolves; table; csv")
    parser.add_argument("--keys", metavar="K1,K2,...",
                        help="only these parameters (default: all; table and csv: the swept ones)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write the plan to FILE atomically (for `dlbs run --plan FILE`)")


def default_keys(planner: Planner) -> list[str]:
    """The columns that tell a plan's experiments apart: the id, then the axes' keys."""
    keys = [ID] if ID in planner.params else []
    keys += planner.axis_keys()
    return keys


def run(args: argparse.Namespace) -> int:
    # The planner makes no reference cycles (its values are plain data, its memo tables
    # grow, nothing else lives past an experiment): collections would walk every object of
    # the loaded configs and the memo, a few times a thousand experiments, to free nothing.
    with no_cyclic_gc():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    for warning in unused_parameters(spec):
        print(f"dlbs: warning: {one_line(warning)}", file=sys.stderr)
    planner = Planner(spec)
    keys = [k.strip() for k in args.keys.split(",") if k.strip()] if args.keys else None
    if keys is None and args.format in ("table", "csv"):
        keys = default_keys(planner)
    # Containers that get the host are said once the plan is made (docs/security.md).
    host_access = HostAccessWatch()
    mask = ExperimentMask()
    experiments = map(mask, host_access.watch(planner.experiments()))
    try:
        _write(args, planner, experiments, keys)
    finally:
        for warning in host_access.warnings():
            print(f"dlbs: warning: {one_line(warning)}", file=sys.stderr)
    if mask.found and args.output:
        print(f"dlbs: note: {one_line(args.output)} holds runtime.results_db without its "
              f"password: `dlbs run --plan {one_line(args.output)}` takes it from PGPASSFILE "
              "or PGPASSWORD (docs/security.md)", file=sys.stderr)
    return 0


def _write(args: argparse.Namespace, planner: Planner, experiments: Iterator[dict[str, Any]],
           keys: list[str] | None) -> None:
    if args.output:
        from dlbs.util.atomic import atomic_writer  # the modules of other outputs: when used

        with atomic_writer(args.output, "wb") as out:
            count = write_plan(experiments, out, args.format, keys)
        print(f"dlbs: wrote {count} experiments to {args.output}", file=sys.stderr)
        return
    out = sys.stdout.buffer
    if args.format != "jsonl":
        # All or nothing: the document reaches stdout only once every experiment resolved.
        import shutil
        import tempfile

        with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
            write_plan(experiments, spool, args.format, keys)
            spool.seek(0)
            shutil.copyfileobj(spool, out)
        out.flush()
        return
    try:
        write_plan(experiments, out, args.format, keys)
    except DlbsError as error:
        if planner.count:
            out.flush()
            error.message += f" (after {planner.count} experiments were written)"
        raise
    out.flush()
