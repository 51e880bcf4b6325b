"""`dlbs results copy SRC DST`: move results between stores (docs/results.md).

SRC and DST are SQLite files, `postgresql://` URLs or folders (a folder of logs as SRC, a
folder's `results.db` as DST), in any direction; copying twice adds nothing. One line on
stderr says what was copied.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `dlbs results`."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True,
                                    parser_class=type(parser))
    copy = actions.add_parser(
        "copy", help="copy every ended attempt that DST lacks from SRC",
        description="Copy every ended attempt of SRC that DST does not hold yet (by its "
                    "experiment and its end time), so that copying twice adds nothing.")
    copy.add_argument("source", metavar="SRC",
                      help="a results database (SQLite file or postgresql:// URL) or a "
                           "folder of logs")
    copy.add_argument("destination", metavar="DST",
                      help="a results database (SQLite file, created when missing, or "
                           "postgresql:// URL), or a folder (its results.db)")


def run(args: argparse.Namespace) -> int:
    """Do the action."""
    from dlbs.results.copying import copy_results

    done = copy_results(args.source, args.destination)
    print(f"dlbs results: {done.line()}", file=sys.stderr)
    return 0
