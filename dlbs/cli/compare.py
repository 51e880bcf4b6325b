"""`dlbs compare BASE NEW`: what got slower, faster, or now fails; exit 1 on a regression.

`dlbs compare STORE --tags V1 V2` compares two run tags of one store; `--base-filter` and
`--new-filter` keep attempts of one side only (`--filter`: of both).

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
    parser.add_argument("new", metavar="NEW", nargs="?",
                        help="the results to judge, as BASE (default: BASE itself, with "
                             "--tags or --base-filter/--new-filter telling the sides apart)")
    parser.add_argument("--tags", nargs=2, metavar=("BASE_TAG", "NEW_TAG"),
                        help="compare the attempts of run tag BASE_TAG (in BASE) with those "
                             "of NEW_TAG (in NEW): two runs of one store")
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
                                                 "(repeatable; both sides)")
    parser.add_argument("--base-filter", dest="base_filters", action="append", default=[],
                        metavar="KEY=GLOB", help="keep only matching attempts in BASE")
    parser.add_argument("--new-filter", dest="new_filters", action="append", default=[],
                        metavar="KEY=GLOB", help="keep only matching attempts in NEW")
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
    from dlbs.errors import DlbsError
    from dlbs.report.compare import compare, parse_threshold, tag_side
    from dlbs.report.inputs import load_inputs
    from dlbs.report.render_compare import render_comparison, summary_line
    from dlbs.report.select import Filter, apply_filters
    from dlbs.util.gc import no_cyclic_gc
    from dlbs.util.terminal import one_line

    threshold = parse_threshold(args.threshold)
    filters = [Filter.parse(text) for text in args.filters]
    side_filters = [[Filter.parse(text, option) for text in texts] for option, texts in
                    (("--base-filter", args.base_filters), ("--new-filter", args.new_filters))]
    if args.new is None and not args.tags and not all(side_filters):
        raise DlbsError("dlbs compare: NEW is missing",
                        hint="compare two stores (BASE NEW), or two runs of one store: "
                             "--tags BASE_TAG NEW_TAG, or --base-filter and --new-filter")
    # Millions of parsed values and no reference cycles: see dlbs/util/gc.py.
    with no_cyclic_gc():
        base = load_inputs([args.base], latest_only=not (args.tags or any(side_filters)))
        new = base if args.new is None else load_inputs(
            [args.new], latest_only=not (args.tags or any(side_filters)))
        sides = [base, new]
        for index, (name, chosen) in enumerate(zip(("BASE", "NEW"), side_filters)):
            if args.tags:
                sides[index] = tag_side(sides[index], args.tags[index], name)
            if chosen:
                sides[index] = sides[index].take(apply_filters(sides[index], chosen))
        comparison = compare(sides[0], sides[1], by=split_list(args.by), filters=filters,
                             threshold=threshold, alpha=args.alpha,
                             columns=split_list(args.columns) or ())
        text = render_comparison(comparison, args.fmt)
        emit(text, args.fmt, args.output)
        if args.output or args.fmt != "text":
            print(f"dlbs compare: {one_line(summary_line(comparison))}", file=sys.stderr)
    return 1 if comparison.regression_count else 0
