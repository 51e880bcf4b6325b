"""`dlbs report`: regular, scaling and pivot tables from logs or results databases."""

from __future__ import annotations

import argparse
import sys
from typing import Any

FORMATS = ("text", "markdown", "csv", "json", "html")


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """Selection options shared by `dlbs report` and `dlbs plot`."""
    parser.add_argument(
        "--filter", dest="filters", action="append", default=[], metavar="KEY=GLOB",
        help="keep experiments whose KEY matches GLOB (repeatable; the same KEY twice: "
             "either), e.g. --filter exp.model='resnet*' --filter env.gpu_model='*H100*'")
    parser.add_argument("--latest", action="store_true",
                        help="count only each experiment's newest attempt, and leave the "
                             "experiment out when that is not ok (default: its newest ok run)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `dlbs report` (its types from the kinds' table: dlbs/report/kinds)."""
    from dlbs.report.kinds import KINDS

    parser.add_argument(
        "inputs", nargs="*", default=["."], metavar="LOGS_OR_DB",
        help="log files, folders (read through their results.db, and searched recursively "
             "for *.log it does not hold), results databases or `dlbs parse` JSON files "
             "(default: the current folder)",
    )
    parser.add_argument("--type", dest="report_type", choices=tuple(KINDS), default="regular",
                        help="; ".join(f"{name}: {text}" for name, (_, text) in KINDS.items()))
    parser.add_argument("--format", dest="fmt", choices=FORMATS, default="text",
                        help="output format (default: text); html: one self-contained page")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write the report to FILE (atomically) instead of stdout")
    parser.add_argument("--by", metavar="K1,K2",
                        help="row keys (default: every identity parameter that varies); "
                             "refused when other identity parameters vary")
    parser.add_argument("--columns", metavar="C1,C2",
                        help="values to show, e.g. time_median,throughput,"
                             "use.gpu_util_mean (with or without results.)")
    parser.add_argument(
        "--baseline", dest="baselines", action="append", default=[], metavar="KEY=GLOB",
        help="regular: add a speedup column, each row's median batch time against its "
             "baseline row's; the baseline rows match every KEY=GLOB (repeatable, as "
             "--filter), e.g. --baseline exp.framework=pytorch --baseline "
             "pytorch.compile=false (docs/reports.md)")
    parser.add_argument("--runs", choices=("latest", "each"), default="latest",
                        help="latest: each experiment's newest ok run (default; a note says "
                             "when older ones exist); each: every ok run in a row of its own. "
                             "Runs are never averaged")
    parser.add_argument("--rows", metavar="K1,K2", help="pivot: row keys")
    parser.add_argument("--cols", metavar="KEY", help="pivot: the key whose values are columns")
    parser.add_argument("--value", metavar="results.X", help="pivot: the value in the cells")
    add_input_arguments(parser)


def __getattr__(name: str) -> Any:
    # REPORT_TYPES: the kinds' names, read when asked (importing dlbs.report imports numpy,
    # which `import dlbs.cli.report` must not).
    if name == "REPORT_TYPES":
        from dlbs.report.kinds import NAMES

        return NAMES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def split_list(text: str | None) -> list[str] | None:
    """`a,b` -> ['a', 'b']; None stays None."""
    if text is None:
        return None
    return [item.strip() for item in text.split(",") if item.strip()]


def run(args: argparse.Namespace) -> int:
    """Build the report and print or write it."""
    from dlbs.cli.output import emit
    from dlbs.report import Options, build_report, render
    from dlbs.report.inputs import load_inputs
    from dlbs.report.select import Filter
    from dlbs.util.gc import no_cyclic_gc
    from dlbs.util.terminal import one_line

    options = Options(
        kind=args.report_type, by=split_list(args.by),
        filters=[Filter.parse(text) for text in args.filters],
        columns=split_list(args.columns), latest=args.latest, runs=args.runs,
        baseline=[Filter.parse(text, "--baseline") for text in args.baselines],
        rows=split_list(args.rows), cols=args.cols, value=args.value)
    # Millions of parsed values and no reference cycles: see dlbs/util/gc.py.
    with no_cyclic_gc():
        report = build_report(load_inputs(args.inputs), options)
        if args.fmt == "html":
            import warnings

            import numpy as np

            from dlbs.report.html import render_html

            # Times near the largest float (1e308, measured or not) overflow matplotlib's
            # tick arithmetic: its warnings are no news to the reader of the page.
            with warnings.catch_warnings(), np.errstate(over="ignore", invalid="ignore"):
                warnings.filterwarnings("ignore", category=RuntimeWarning,
                                        module="matplotlib")
                text = render_html(report)
        else:
            text = render(report, args.fmt)
        emit(text, args.fmt, args.output)
        if args.fmt == "csv":
            # CSV holds data only; what was left out still has to reach the reader.
            for note in report.footnotes():
                print(f"dlbs report: {one_line(note)}", file=sys.stderr)
    return 0
