"""`dlbs plot`: a chart (PNG or SVG) of results, from a preset or `--x`/`--y`."""

from __future__ import annotations

import argparse
import os
import sys

PRESETS = ("weak", "strong", "latency", "monitor", "efficiency")
KINDS = ("line", "bar")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `dlbs plot` (choices spelled here to keep imports light)."""
    from dlbs.cli.report import add_input_arguments

    parser.add_argument("inputs", nargs="+", metavar="LOGS_OR_DB",
                        help="log files, folders, results databases or `dlbs parse` JSON")
    parser.add_argument("-o", "--output", required=True, metavar="FILE.png|FILE.svg",
                        help="the chart file; its suffix picks the format")
    parser.add_argument("--preset", choices=PRESETS,
                        help="weak/strong: throughput and efficiency against GPUs; latency: "
                             "latency percentiles against QPS; monitor: one experiment's "
                             "resource use over time (with --exp); efficiency: throughput "
                             "against power, one point per experiment")
    parser.add_argument("--x", metavar="KEY", help="the parameter along the x axis")
    parser.add_argument("--y", metavar="results.X", help="the value along the y axis")
    parser.add_argument("--series", metavar="KEY", help="one line (or bar group) per value")
    parser.add_argument("--kind", choices=KINDS, default="line", help="line (default) or bar")
    parser.add_argument("--exp", dest="experiment", metavar="ID",
                        help="monitor preset: the experiment's exp.id (or a unique prefix)")
    parser.add_argument("--title", help="the chart's title")
    add_input_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Draw and write the chart."""
    from dlbs.errors import ResultsError
    from dlbs.report.inputs import load_inputs
    from dlbs.report.plot import Chart, chart, save
    from dlbs.report.select import Filter
    from dlbs.results.sources import Detail, load_experiments
    from dlbs.util.atomic import atomic_write

    fmt = os.path.splitext(args.output)[1].lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise ResultsError(f"-o {args.output}: charts are written as .png or .svg")
    request = Chart(preset=args.preset, x=args.x, y=args.y, series=args.series,
                    kind=args.kind, filters=[Filter.parse(text) for text in args.filters],
                    latest=args.latest, experiment=args.experiment, title=args.title)
    # The monitor's series are number lists, which only whole records hold; the other
    # charts are reports drawn, read as columns.
    source = load_experiments(args.inputs, Detail()).records if args.preset == "monitor" \
        else load_inputs(args.inputs)
    atomic_write(args.output, save(chart(source, request), fmt))
    print(f"dlbs plot: wrote {args.output}", file=sys.stderr)
    return 0
