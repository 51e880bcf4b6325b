"""`dlbs report`: regular, weak- and strong-scaling tables from logs or results databases."""

from __future__ import annotations

import argparse
import sys

REPORT_TYPES = ("regular", "weak", "strong")
FORMATS = ("text", "markdown", "csv", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `dlbs report` (the choices are spelled here to keep imports light)."""
    parser.add_argument(
        "inputs", nargs="*", default=["."], metavar="LOGS_OR_DB",
        help="log files, folders (searched recursively for *.log), results databases or "
             "`dlbs parse` JSON files (default: the current folder)",
    )
    parser.add_argument("--type", dest="report_type", choices=REPORT_TYPES, default="regular",
                        help="regular: model x batch; weak: same replica batch across GPU "
                             "counts; strong: same effective batch across GPU counts")
    parser.add_argument("--format", dest="fmt", choices=FORMATS, default="text",
                        help="output format (default: text)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write the report to FILE (atomically) instead of stdout")


def run(args: argparse.Namespace) -> int:
    """Build the report and print or write it."""
    from dlbs.report import build_report, render
    from dlbs.results.sources import load_experiments
    from dlbs.util.atomic import atomic_write

    loaded = load_experiments(args.inputs)
    report = build_report(loaded.records, args.report_type)
    text = render(report, args.fmt)
    if args.output:
        atomic_write(args.output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if args.fmt == "csv":
        # CSV holds data only; what was left out still has to reach the reader.
        for note in report.footnotes():
            print(f"dlbs report: {note}", file=sys.stderr)
    return 0
