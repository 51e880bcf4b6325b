"""Notes that belong to one cell, shown beside its numbers in every report kind.

- `INVALID (LoadGen): why`: LoadGen judged the run invalid (`results.loadgen_valid` false;
  why: `results.loadgen_invalid_reasons`, when the backend recorded it).
- `warning: ...`: each warning recorded with the results (`results.stats_warnings`): what
  the backend printed (a recompilation inside LoadGen's timed run, a host-bound pace), and
  the statistics engine's (a summary value the backend printed that its per-batch times
  contradict).
- `runs disagree: ...`: the experiment's ok runs differ beyond their spread (runs.py).
- `top-5 not reported: why`: a model of five classes or fewer, whose top-5 would be 1
  whatever it predicts (`results.top5_unavailable`, from the backend).

Text, markdown and HTML show them in a `notes` column (tables with a column axis: a marker
`[k]` after the value and the note below the table); CSV and JSON in the `notes` field.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlbs.report.identity import column_of
from dlbs.report.kinds.base import BENCHMARK, SCENARIO
from dlbs.report.metrics import Metric
from dlbs.report.runs import disagreements
from dlbs.report.select import Selection
from dlbs.results.columns import Attempts
from dlbs.results.stats import WARNINGS_KEY

VALID_KEY = "results.loadgen_valid"
INVALID_REASONS_KEY = "results.loadgen_invalid_reasons"
TOP5_UNAVAILABLE_KEY = "results.top5_unavailable"
ACCURACY = "accuracy"


def cell_notes(selection: Selection, metrics: Sequence[Metric]) -> dict[int, list[str]]:
    """The notes of each cell (unit of `selection`) that has some (see the module)."""
    attempts, shown = selection.attempts, selection.members
    notes: dict[int, list[str]] = {}

    def add(cells: np.ndarray, texts: list[str]) -> None:
        for cell, text in zip(cells.tolist(), texts):
            notes.setdefault(cell, []).append(text)

    invalid = _invalid(attempts, shown)
    if invalid.any():
        cells = np.flatnonzero(invalid)
        reasons = _texts(attempts, INVALID_REASONS_KEY, shown[cells])
        add(cells, ["INVALID (LoadGen)" + (f": {'; '.join(why)}" if why else "")
                    for why in reasons])
    # Every warning travels in results.stats_warnings (results/stats.py), which the store
    # flags: found without reading 100,000 summaries.
    column = column_of(attempts, WARNINGS_KEY)
    cells = np.flatnonzero(column.codes[shown] != 0)
    for cell, texts in zip(cells.tolist(), _texts(attempts, WARNINGS_KEY, shown[cells])):
        notes.setdefault(cell, []).extend(f"warning: {text}" for text in texts)
    cells = np.flatnonzero(_accuracy(attempts, shown))
    if len(cells):   # a results database reads a result key from every summary: only then
        texts = _texts(attempts, TOP5_UNAVAILABLE_KEY, shown[cells])
        for cell, why in zip(cells.tolist(), texts):
            notes.setdefault(cell, []).extend(f"top-5 not reported: {text}" for text in why)
    for cell, found in disagreements(selection, metrics).items():
        others = f" (and {len(found) - 1} other value(s))" if len(found) > 1 else ""
        notes.setdefault(cell, []).append(f"runs disagree: {found[0].describe()}{others}")
    return notes


def _accuracy(attempts: Attempts, shown: np.ndarray) -> np.ndarray:
    """Which shown attempts ran the accuracy scenario."""
    scenarios = column_of(attempts, SCENARIO)
    return np.array([value == ACCURACY for value in scenarios.values],
                    dtype=bool)[scenarios.codes[shown]]


def _invalid(attempts: Attempts, shown: np.ndarray) -> np.ndarray:
    """Which shown attempts LoadGen judged invalid (read only where a scenario ran)."""
    scenarios = column_of(attempts, SCENARIO)
    loadgen = np.array([value not in (None, "", BENCHMARK) for value in scenarios.values],
                       dtype=bool)[scenarios.codes[shown]]
    if not loadgen.any():   # a results database reads a result key from every summary
        return np.zeros(len(shown), dtype=bool)
    valid = column_of(attempts, VALID_KEY)
    return np.array([value is False for value in valid.values], dtype=bool)[
        valid.codes[shown]] & loadgen


def _texts(attempts: Attempts, key: str, rows: np.ndarray) -> list[list[str]]:
    """The texts of `key` (a list of texts, or one) of the attempts `rows`."""
    column = column_of(attempts, key)
    values = column.values
    found = []
    for code in column.codes[rows].tolist():
        value = values[code]
        if value in (None, "", []):
            found.append([])
        elif isinstance(value, list | tuple):
            found.append([str(item) for item in value if str(item)])
        else:
            found.append([str(value)])
    return found
