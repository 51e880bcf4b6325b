"""`dlbs history DB`: each configuration's results over run tags; `--check` gates CI on it.

Without --check: one row per configuration, its runs oldest to newest. With --check: the
newest run of each configuration against its lookback window (Conbench's lookback z-score:
dlbs/history/check.py, docs/results.md); exit 1 when one regressed or its newest run failed,
2 when there was nothing to judge (a filter matching nothing, a metric no attempt has).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dlbs.cli.report import split_list

if TYPE_CHECKING:
    from dlbs.history import History
    from dlbs.report.select import Filter


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
                             "window; exit 1 when one regressed or its newest run failed")
    parser.add_argument("--window", type=int, default=20, metavar="N",
                        help="--check: the earlier runs compared with (default 20)")
    parser.add_argument("--z", type=float, default=3.0, metavar="Z",
                        help="--check: the z-score beyond which a change counts (default 3)")
    parser.add_argument("--min-change", default="5%", metavar="PCT",
                        help="--check: the smallest change that counts (default 5%%)")


def run(args: argparse.Namespace) -> int:
    """Build the history, print it; with --check, the verdicts and the exit status."""
    from dlbs.errors import DlbsError
    from dlbs.history import Settings, build_history, check
    from dlbs.history import render as shown
    from dlbs.history.check import FAILED, FAILING, REGRESSION
    from dlbs.report.compare import parse_threshold
    from dlbs.report.inputs import load_inputs
    from dlbs.report.select import Filter
    from dlbs.util.atomic import atomic_write
    from dlbs.util.gc import no_cyclic_gc

    try:
        min_change = parse_threshold(args.min_change)
    except DlbsError:
        raise DlbsError(f"--min-change {args.min_change!r} is not a percentage",
                        hint="e.g. --min-change 5% (or 0.05)") from None
    settings = Settings(args.window, args.z, min_change)   # refuses nan, inf, negatives
    filters = [Filter.parse(text) for text in args.filters]
    with no_cyclic_gc():
        history = build_history(load_inputs(args.inputs), by=split_list(args.by),
                                filters=filters, metric=args.metric)
        if args.check and not history.size:
            raise DlbsError(f"history --check: nothing to judge: {_why_empty(history, filters)}",
                            hint="a gate that judged nothing is not a pass")
        verdicts = check(history, settings.window, settings.z, settings.min_change) \
            if args.check else None
    if args.fmt == "json":
        output = shown.as_json(history, verdicts)
    elif args.fmt == "csv":
        output = shown.points_csv(history)
    elif verdicts is not None:
        output = f"{shown.statistic(history)} of the newest run against its window\n" + \
            shown.text(*shown.verdict_table(history, verdicts)) + \
            "".join(line + "\n" for line in shown.problem_lines(history, verdicts))
    else:
        output = f"{shown.statistic(history)} of each run\n" + \
            shown.text(*shown.series_table(history))
    if args.output:
        atomic_write(args.output, output)
    else:
        sys.stdout.write(output)
        sys.stdout.flush()
    for line in shown.left_out_lines(history):
        print(f"dlbs history: warning: {line}", file=sys.stderr)
    if verdicts is None:
        print(f"dlbs history: {history.size} configuration(s), {history.point_count} run(s) "
              f"of {history.metric}{_without(history, filters)}", file=sys.stderr)
        return 0
    counts = {status: sum(1 for v in verdicts if v.status == status)
              for status in ("regression", "failed", "improvement", "steady", "too few")}
    print(f"dlbs history: {counts[REGRESSION]} regression(s), {counts[FAILED]} failed, "
          f"{counts['improvement']} improvement(s), {counts['steady']} steady, "
          f"{counts['too few']} with too few earlier runs, of {len(verdicts)} "
          f"configuration(s) (window {settings.window}, z {settings.z:g}, min change "
          f"{settings.min_change:.1%} of {history.metric}){_without(history, filters)}",
          file=sys.stderr)
    return 1 if any(counts[status] for status in FAILING) else 0


def _why_empty(history: History, filters: Sequence[Filter]) -> str:
    """Why a history has no configuration, in words."""
    if not history.matched:
        return "the filters match no ended attempt" if filters else \
            "the inputs hold no ended attempt"
    left = [f"{len(history.future)} dated in the future" if history.future else "",
            f"{history.invalid} with a value below zero" if history.invalid else ""]
    detail = "; ".join(item for item in left if item)
    return (f"no ok attempt of the {history.matched} matched has a value of {history.metric}"
            + (f" ({detail})" if detail else ""))


def _without(history: History, filters: Sequence[Filter]) -> str:
    """The note of a summary line on what has no series."""
    notes = []
    if not history.matched and filters:
        notes.append("the filters match no ended attempt")
    if history.without_points:
        notes.append(f"{history.without_points} configuration(s) with no ok run left out")
    return "; " + "; ".join(notes) if notes else ""
