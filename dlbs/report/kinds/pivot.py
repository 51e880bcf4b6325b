"""`--type pivot`: DLBS's free table, `--value` by `--rows` and `--cols`.

Its rows are the keys the user names (which must tell the experiments apart, as `--by`
must); its columns are the values of `--cols`; its one value is `--value`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dlbs.errors import ResultsError
from dlbs.report.kinds.base import ReportKind
from dlbs.report.metrics import Metric, resolve
from dlbs.report.options import Options
from dlbs.report.select import resolve_key
from dlbs.results.columns import Attempts


@dataclass(frozen=True)
class Pivot(ReportKind):
    """The pivot table (see the module)."""

    chart: str = "pivot"
    needs_model: bool = False

    def metrics(self, options: Options, attempts: Attempts, rows: np.ndarray) -> list[Metric]:
        if options.baseline:
            raise ResultsError("--baseline compares the rows of a regular report, not of "
                               "--type pivot",
                               hint="weak and strong reports show their speedup over one GPU")
        if options.rows is None or not options.cols or not options.value:
            raise ResultsError("--type pivot needs --rows KEY, --cols KEY and --value "
                               "results.X", hint="e.g. --rows exp.model --cols "
                               "exp.replica_batch --value results.throughput")
        if options.columns:
            raise ResultsError("--type pivot shows one value: give it with --value, "
                               "not --columns")
        return resolve([options.value], attempts, rows, scaling=False)

    def asked_row_keys(self, options: Options) -> list[str]:
        return list(options.rows or [])

    def column_key(self, options: Options, attempts: Attempts, rows: np.ndarray) -> str:
        return resolve_key(str(options.cols), attempts, rows)

    def heading(self, metrics: Sequence[Metric], column_title: str) -> str:
        if not metrics:
            return self.title
        return f"{self.title}: {metrics[0].title} by {column_title}"


KIND = Pivot("pivot", "Pivot table")
