"""`dlbs history DB`: each configuration's results over run tags; `--check` gates CI on it.

Without --check: one row per configuration, its runs oldest to newest. With --check: the
newest run of each configuration against its lookback window (Conbench's lookback z-score:
dlbs/history/check.py, docs/results.md); exit 1 when one regressed.
"""

from __future__ import annotations

import argparse
import sys

from dlbs.cli.report import split_list


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `dlbs history`."""
    parser.add_argument("inputs", nargs="+", metavar="DB",
                        help="results databases (SQLite files or postgresql:// URLs), or "
                             "log folders")
    parser.add_argument("--by", metavar="K1,K2",
                        help="the keys that make a configuration (default: the experiment "
                             "and its device model, as report rows)")
    parser.add_argument("--filter", dest="filters", action="append", default=[],
                        metavar="KEY=GLOB", help="keep attempts whose KEY matches GLOB "
                        "(repeatable, as in dlbs report)")
    parser.add_argument("--metric", default="time_median", metavar="results.X",
                        help="the value followed (default: time_median, the median batch "
                             "time; throughput: higher is better)")
    parser.add_argument("--format", dest="fmt", choices=("text", "csv", "json"),
                        default="text", help="text (default), csv (every point) or json")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write to FILE (atomically) instead of stdout")
    parser.add_argument("--check", action="store_true",
                        help="judge each configuration's newest run against its lookback "
                             "window; exit 1 when one regressed")
    parser.add_argument("--window", type=int, default=20, metavar="N",
                        help="--check: the earlier runs compared with (default 20)")
    parser.add_argument("--z", type=float, default=3.0, metavar="Z",
                        help="--check: the z-score beyond which a change counts (default 3)")
    parser.add_argument("--min-change", default="5%", metavar="PCT",
                        help="--check: the smallest change that counts (default 5%%)")


def run(args: argparse.Namespace) -> int:
    """Build the history, print it; with --check, the verdicts and the exit status."""
    from dlbs.errors import DlbsError
    from dlbs.history import build_history, check
    from dlbs.history import render as shown
    from dlbs.report.compare import parse_threshold
    from dlbs.report.inputs import load_inputs
    from dlbs.report.select import Filter
    from dlbs.util.atomic import atomic_write
    from dlbs.util.gc import no_cyclic_gc

    if args.window < 1 or args.z < 0:
        raise DlbsError("--window must be at least 1 and --z at least 0")
    try:
        min_change = parse_threshold(args.min_change)
    except DlbsError:
        raise DlbsError(f"--min-change {args.min_change!r} is not a percentage",
                        hint="e.g. --min-change 5% (or 0.05)") from None
    with no_cyclic_gc():
        history = build_history(load_inputs(args.inputs), by=split_list(args.by),
                                filters=[Filter.parse(text) for text in args.filters],
                                metric=args.metric)
        verdicts = check(history, args.window, args.z, min_change) if args.check else None
    if args.fmt == "json":
        output = shown.as_json(history, verdicts)
    elif args.fmt == "csv":
        output = shown.points_csv(history)
    elif verdicts is not None:
        output = shown.text(*shown.verdict_table(history, verdicts))
    else:
        output = shown.text(*shown.series_table(history))
    if args.output:
        atomic_write(args.output, output)
    else:
        sys.stdout.write(output)
        sys.stdout.flush()
    if verdicts is None:
        print(f"dlbs history: {len(history.series)} configuration(s), "
              f"{sum(len(s.values) for s in history.series)} run(s) of {history.metric}",
              file=sys.stderr)
        return 0
    counts = {status: sum(1 for v in verdicts if v.status == status)
              for status in ("regression", "improvement", "steady", "too few")}
    print(f"dlbs history: {counts['regression']} regression(s), {counts['improvement']} "
          f"improvement(s), {counts['steady']} steady, {counts['too few']} with too few "
          f"earlier runs, of {len(verdicts)} configuration(s) (window {args.window}, "
          f"z {args.z:g}, min change {min_change:.1%})", file=sys.stderr)
    return 1 if counts["regression"] else 0
