"""What a report kind decides, and the choices most kinds share.

A `ReportKind` answers the questions the tables ask (tables.py), so that they never ask
which kind they build:

- which attempts it shows (`in_scope`: the experiments of its scenarios);
- its values (`metrics`: the defaults, `--columns`, `--baseline`) and the options it refuses;
- which experiments have what it needs (`usable`);
- its row keys (`asked_row_keys`: given; `lead_keys`: always shown first) and its column axis
  (`column_key`: none, the GPU count, a pivot's key);
- the values it computes from other cells (`derived`: speedup and efficiency);
- its title, its heading and its chart (a name of `plot.REPORT_CHARTS`).

The defaults are a regular report's; a kind overrides what it does otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.report import baseline as baseline_module
from dlbs.report.identity import column_of, has_value_of, per_code
from dlbs.report.keys import ValuesOf
from dlbs.report.metrics import (
    EFFICIENCY,
    SPEEDUP,
    THROUGHPUT,
    TIME,
    CellValues,
    Metric,
    has_values,
    metric,
    resolve,
)
from dlbs.report.options import Options
from dlbs.report.select import Selection
from dlbs.results.columns import Attempts

SCENARIO = "exp.scenario"
# The scenario of an experiment without one: the backend's own timed loop.
BENCHMARK = "benchmark"


@dataclass(frozen=True)
class ReportKind:
    """A kind of report (see the module); the defaults are a regular report's."""

    name: str
    title: str
    # Row keys always shown (when --by does not say otherwise), even when constant.
    lead_keys: tuple[str, ...] = ()
    default_metrics: tuple[str, ...] = (TIME, THROUGHPUT)
    # The exp.scenario values of the experiments it shows (None: every scenario), and
    # those it leaves out (no list of every scenario: the configs' choices are that).
    scenarios: tuple[str, ...] | None = None
    not_scenarios: tuple[str, ...] = ()
    # How the HTML page draws it: a name of plot.REPORT_CHARTS.
    chart: str = "bars"
    # --baseline: a speedup column against baseline rows (baseline.py).
    accepts_baseline: bool = False
    # Its experiments need an exp.model (a pivot shows any value by any keys).
    needs_model: bool = True
    # speedup and efficiency are values of its cells (--columns may name them).
    scaling: bool = False

    # -- which experiments --------------------------------------------------------------

    def in_scope(self, attempts: Attempts) -> tuple[np.ndarray | None, int]:
        """The attempts it shows (indices; None: all) and how many others it leaves out."""
        if not self.picks_scenarios:
            return None, 0
        column = attempts.column(SCENARIO)
        inside = np.array([self.shows(scenario_of(value)) for value in column.values],
                          dtype=bool)
        kept = np.flatnonzero(inside[column.codes])
        return kept, attempts.size - len(kept)

    @property
    def picks_scenarios(self) -> bool:
        """Whether it shows the experiments of some scenarios only."""
        return self.scenarios is not None or bool(self.not_scenarios)

    def shows(self, scenario: str) -> bool:
        """Whether it shows the experiments of `scenario`."""
        return (self.scenarios is None or scenario in self.scenarios) and \
            scenario not in self.not_scenarios

    def usable(self, selection: Selection, metrics: Sequence[Metric]) -> np.ndarray:
        """Which units (cells) have what it needs: a model, a value to show."""
        return ~self._lacking(selection, metrics).any(axis=0)

    def lacks(self, selection: Selection, metrics: Sequence[Metric],
              units: np.ndarray) -> list[str]:
        """What each of `units` (not usable) lacks, in words: "a model", ..."""
        lacking = self._lacking(selection, metrics)[:, units]
        words = self._needs(metrics)
        return [next(word for word, lacks in zip(words, column) if lacks)
                for column in lacking.T.tolist()]

    def _needs(self, metrics: Sequence[Metric]) -> list[str]:
        """What `_lacking`'s rows are, in words."""
        shown = ", ".join(item.title for item in metrics if item.key != EFFICIENCY)
        return ["a model", f"a value of the columns shown ({shown})"]

    def _lacking(self, selection: Selection, metrics: Sequence[Metric]) -> np.ndarray:
        """Per need (`_needs`), which units lack it (booleans, one row per need)."""
        attempts = selection.attempts
        shown = selection.members
        found = np.zeros(len(shown), dtype=bool)
        for item in metrics:
            if item.key == SPEEDUP:   # over a baseline
                found |= has_value_of(attempts, baseline_module.SPEEDUP_TIME)[shown]
            elif item.key != EFFICIENCY:
                found |= has_values(attempts, item.key)[shown]
        return np.stack([~self._with_model(attempts, shown), ~found])

    def _with_model(self, attempts: Attempts, shown: np.ndarray) -> np.ndarray:
        if not self.needs_model:
            return np.ones(len(shown), dtype=bool)
        models = column_of(attempts, "exp.model")
        return per_code(models, bool, bool)[models.codes[shown]]

    # -- values -------------------------------------------------------------------------

    def metrics(self, options: Options, attempts: Attempts, rows: np.ndarray) -> list[Metric]:
        """Its values: `--columns` (checked against the attempts `rows`), else the defaults."""
        self.refuse_others(options)
        if options.baseline and not self.accepts_baseline:
            raise ResultsError(f"--baseline compares the rows of a regular report, not of "
                               f"--type {self.name}",
                               hint="weak and strong reports show their speedup over one GPU")
        if options.columns:
            found = resolve(options.columns, attempts, rows, scaling=self.scaling,
                            baseline=bool(options.baseline))
            if options.baseline and all(item.key != SPEEDUP for item in found):
                found.append(metric(SPEEDUP))
            return found
        if options.baseline:
            return [metric(key) for key in baseline_module.METRICS]
        return [metric(key) for key in self.default_metrics]

    def refuse_others(self, options: Options) -> None:
        """Refuse the options of another kind (a pivot's)."""
        if options.rows or options.cols or options.value:
            raise ResultsError("--rows, --cols and --value belong to --type pivot")

    def needed(self) -> tuple[str, ...]:
        """Values its derived ones read, computed even when not shown."""
        return ()

    def derived(self, row: np.ndarray, scale: np.ndarray,
                values: dict[str, CellValues]) -> dict[str, CellValues]:
        """Values computed from other cells (per cell: its row, its GPU count)."""
        return {}

    # -- rows and columns ----------------------------------------------------------------

    def asked_row_keys(self, options: Options) -> list[str] | None:
        """The row keys the user gave (None: chosen from what varies)."""
        return None if options.by is None else list(options.by)

    def leading(self, varying: Sequence[str], values_of: ValuesOf) -> list[str]:
        """The row keys shown first: its lead keys that some experiment has."""
        return [key for key in self.lead_keys if values_of(key).any()]

    def column_key(self, options: Options, attempts: Attempts, rows: np.ndarray) -> str | None:
        """The key whose values are the columns (None: one table of values)."""
        return None

    def scale_label(self, attempts: Attempts, rows: np.ndarray) -> str:
        """What its GPU-count axis counts for the attempts `rows` (scaling kinds)."""
        return "GPUs"

    def heading(self, metrics: Sequence[Metric], column_title: str) -> str:
        """The report's first line."""
        return self.title

    def notes(self, cells: Any, values_of: ValuesOf) -> list[str]:
        """Footnotes of its own about the report's cells (document.Cells)."""
        return []


def scenario_of(value: object) -> str:
    """An exp.scenario value as a name: `benchmark` when unset."""
    return BENCHMARK if value in (None, "") else str(value)
