"""`dlbs parse`: experiments from logs (DLBS's too), folders and results databases.

Prints JSON on stdout, or writes `-o FILE` (.json or .csv) atomically. A one-line summary
goes to stderr.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from typing import Any

from dlbs.errors import ResultsError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `dlbs parse`."""
    parser.add_argument(
        "inputs", nargs="+", metavar="LOGS",
        help="log files, folders (searched recursively for *.log) or results databases",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE",
        help="write to FILE instead of stdout; .csv gives CSV, anything else JSON",
    )
    parser.add_argument(
        "--keys", metavar="PATTERNS",
        help="keep only these keys: comma-separated names or globs, e.g. "
             "'exp.model,exp.replica_batch,results.*'",
    )


def _select(experiment: dict[str, Any], patterns: list[str]) -> dict[str, Any]:
    return {key: value for key, value in experiment.items()
            if any(fnmatch.fnmatchcase(key, pattern) for pattern in patterns)}


def run(args: argparse.Namespace) -> int:
    """Parse the inputs and write the experiments."""
    from dlbs.cli.output import emit
    from dlbs.config.limits import MAX_LINE_BYTES
    from dlbs.results.output import experiments_to_csv, to_json
    from dlbs.results.sources import experiments_document, load_experiments

    output = args.output
    fmt = "csv" if output and output.lower().endswith(".csv") else "json"
    loaded = load_experiments(args.inputs)
    experiments = loaded.experiments
    if args.keys is not None:
        patterns = [pattern.strip() for pattern in args.keys.split(",") if pattern.strip()]
        if not patterns:
            raise ResultsError("--keys is empty", hint="e.g. --keys 'exp.model,results.*'")
        experiments = [_select(experiment, patterns) for experiment in experiments]
    text = (experiments_to_csv(experiments) if fmt == "csv"
            else to_json(experiments_document(experiments)))
    emit(text, fmt, output)
    statuses: dict[str, int] = {}
    for record in loaded.records:
        status = str(record.experiment.get("results.status"))
        statuses[status] = statuses.get(status, 0) + 1
    summary = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
    line = f"dlbs parse: {len(loaded.records)} experiment(s)"
    if summary:
        line += f" ({summary})"
    if loaded.unparsable_lines:
        line += f"; {loaded.unparsable_lines} protocol line(s) with a value that is not JSON"
    if loaded.too_long_lines:
        line += (f"; {loaded.too_long_lines} line(s) longer than "
                 f"{MAX_LINE_BYTES // 2**20} MiB passed over")
    if loaded.cut_lines:
        line += f"; {loaded.cut_lines} log(s) cut short inside a number (failures)"
    if loaded.refused_keys:
        keys = ", ".join(sorted(loaded.refused_keys))
        line += (f"; {max(loaded.refused_keys.values())} log(s) printed {keys}, which a "
                 "benchmark does not set: not taken (docs/backends/protocol.md section 4)")
    if loaded.ignored_files:
        line += f"; {len(loaded.ignored_files)} file(s) without protocol lines ignored"
    if output:
        line += f"; written to {output}"
    print(line, file=sys.stderr)
    return 0
