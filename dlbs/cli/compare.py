"""`dlbs compare BASE NEW`: what got slower, faster, or now fails; exit 1 on a regression.

Exit status: 0 when nothing got significantly slower than the threshold, 1 when something
did (or an ok experiment now fails), 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys

FORMATS = ("text", "markdown", "csv", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `dlbs compare`."""
    parser.add_argument("base", metavar="BASE",
                        help="the reference: a log folder, a log file, a results database "
                             "or `dlbs parse` JSON")
    parser.add_argument("new", metavar="NEW", help="the results to judge, as BASE")
    parser.add_argument("--by", metavar="K1,K2",
                        help="match on these keys only (default: every identity parameter "
                             "both sides have)")
    parser.add_argument("--threshold", default="3%", metavar="PERCENT",
                        help="changes of the median batch time within it are 'same' "
                             "(default: 3%%)")
    parser.add_argument("--alpha", type=float, default=0.01,
                        help="significance level of the Mann-Whitney U test (default: 0.01)")
    parser.add_argument("--filter", dest="filters", action="append", default=[],
                        metavar="KEY=GLOB", help="compare only matching experiments "
                                                 "(repeatable)")
    parser.add_argument("--columns", metavar="C1,C2",
                        help="other values shown beside the batch time, both sides and their "
                             "change (report columns: energy_per_sample_j,mfu,...); the "
                             "verdict stays the batch time's")
    parser.add_argument("--format", dest="fmt", choices=FORMATS, default="text",
                        help="output format (default: text)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write to FILE (atomically) instead of stdout")


def run(args: argparse.Namespace) -> int:
    """Compare and print; the exit status says whether anything regressed."""
    from dlbs.cli.output import emit
    from dlbs.cli.report import split_list
    from dlbs.report.compare import compare, parse_threshold
    from dlbs.report.inputs import load_inputs
    from dlbs.report.render_compare import render_comparison, summary_line
    from dlbs.report.select import Filter
    from dlbs.util.gc import no_cyclic_gc
    from dlbs.util.terminal import one_line

    threshold = parse_threshold(args.threshold)
    filters = [Filter.parse(text) for text in args.filters]
    # Millions of parsed values and no reference cycles: see dlbs/util/gc.py.
    with no_cyclic_gc():
        base = load_inputs([args.base], latest_only=True)
        new = load_inputs([args.new], latest_only=True)
        comparison = compare(base, new, by=split_list(args.by), filters=filters,
                             threshold=threshold, alpha=args.alpha,
                             columns=split_list(args.columns) or ())
        text = render_comparison(comparison, args.fmt)
        emit(text, args.fmt, args.output)
        if args.output or args.fmt != "text":
            print(f"dlbs compare: {one_line(summary_line(comparison))}", file=sys.stderr)
    return 1 if comparison.regression_count else 0
