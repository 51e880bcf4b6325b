"""Speed-up over a baseline configuration: `dlbs report --baseline KEY=GLOB`.

The **baseline rows** are the rows whose experiment matches every `--baseline` pattern, as
`--filter` matches (different keys must all match; the same key twice: either). A row's
**baseline** is the one baseline row that has the row's value of every *compared* key that
both rows have. The compared keys are the report's row keys except `exp.id`, the `--baseline`
keys (where a row may differ from its baseline: that is the comparison), and the keys that
the configs compute from what a `--baseline` key is computed from, when the report's rows
bear it out: such a key follows from the `--baseline` keys and the other compared keys there
(`exp.effective_batch` with `--baseline exp.num_gpus=1`: both follow from `exp.gpus`). A
plain parameter is always compared, whatever the data: a PyTorch run at batch 8 is no
baseline of an MXNet run at batch 1 because no other PyTorch row exists. A key that one of
the two rows lacks (the other framework's parameters: `mxnet.hybridize` against a PyTorch
baseline) belongs to a configuration, not to what both measure, so it is not compared. So a
baseline row is its own baseline, and every other row is compared with the baseline row of
its model, batch, dtype, phase, device and whatever else it shares with it.

A row with no baseline row, or with several, is refused: the message names the keys that
decide, so that the baseline can be told more precisely (or the row filtered out).

    speedup = the baseline row's median batch time / the row's

The median, not the mean: a batch that the machine's load or a compilation slowed does not
move it. The default values beside it are medians too (the median batch time and the
throughput at the median: metrics.py), never a median beside a mean.

Rows are matched per pair of "which compared keys a row has" patterns (few: about one per
framework), each pair by grouping key codes with numpy, so 100,000 rows take milliseconds.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.report.identity import KeyRules
from dlbs.report.keys import EXP_ID, ValuesOf, choose, refine, title
from dlbs.report.select import as_text

# The batch time a speed-up divides: the statistics engine's median of the timed batches.
SPEEDUP_TIME = "results.time_median"
# A regular report's values with --baseline: the median batch time, the throughput at the
# median, the speedup.
METRICS = (SPEEDUP_TIME, "throughput_median", "speedup")


@dataclass(frozen=True)
class Rows:
    """A report's rows: per row key (in order), each row's code (0: no value) and the values.

    `tables[k][code]` is the value of code `code` of key `keys[k]`.
    """

    keys: Sequence[str]
    codes: Sequence[np.ndarray]
    tables: Sequence[Any]

    @property
    def size(self) -> int:
        """How many rows."""
        return len(self.codes[0]) if self.codes else 0

    def value(self, key_index: int, row: int) -> Any:
        """Row `row`'s value of the key `keys[key_index]` (None: it lacks the key)."""
        code = int(self.codes[key_index][row])
        return None if code == 0 else self.tables[key_index][code]

    def describe(self, row: int) -> str:
        """`model resnet50, framework mxnet, ...`: the row's keys that it has."""
        parts = []
        for index, key in enumerate(self.keys):
            value = self.value(index, row)
            if value is not None:
                parts.append(f"{title(key)} {as_text(value)}")
        return ", ".join(parts)


def compared_keys(count: int, row_keys: Sequence[str], baseline_keys: Sequence[str],
                  rules: KeyRules, values_of: ValuesOf) -> list[str]:
    """The row keys a row and its baseline must agree on, where both have them (the module).

    `values_of` gives the codes of a key over the `count` rows' experiments.
    """
    fixed = list(dict.fromkeys(baseline_keys))
    others = [key for key in row_keys if key not in fixed and key != EXP_ID]
    origins = set(fixed).union(*(rules.sources.get(key, ()) for key in fixed))
    related = [key for key in others if rules.sources.get(key, frozenset()) & origins]
    unrelated = [key for key in others if key not in related]
    given = fixed + unrelated
    kept = choose(count, related, given, values_of)[len(given):]
    return [key for key in others if key in unrelated or key in kept]


def baselines(rows: Rows, is_baseline: np.ndarray, compared_keys: Collection[str],
              request: str) -> np.ndarray:
    """Per row, the number of its baseline row (see the module); refuses what has none or two."""
    compared = [index for index, key in enumerate(rows.keys) if key in compared_keys]
    bases = np.flatnonzero(is_baseline)
    if not len(bases):
        raise ResultsError(f"--baseline {request}: no row of the report matches",
                           hint="match the values as the report shows them (booleans and "
                                "lists as JSON), e.g. --baseline pytorch.compile=false")
    count = rows.size
    matrix = np.stack([np.asarray(rows.codes[index], dtype=np.int64) for index in compared],
                      axis=1) if compared else np.zeros((count, 0), dtype=np.int64)
    has = matrix != 0
    patterns, pattern_of = np.unique(has, axis=0, return_inverse=True)
    pattern_of = pattern_of.reshape(-1)
    members = [np.flatnonzero(pattern_of == pattern) for pattern in range(len(patterns))]
    found = np.zeros(count, dtype=np.intp)
    chosen = np.full(count, -1, dtype=np.intp)
    for base_pattern in np.unique(pattern_of[bases]).tolist():
        pattern_bases = bases[pattern_of[bases] == base_pattern]
        for row_pattern, pattern_rows in enumerate(members):
            both = np.flatnonzero(patterns[row_pattern] & patterns[base_pattern]).tolist()
            together = np.concatenate([pattern_rows, pattern_bases])
            groups, size = np.zeros(len(together), dtype=np.int64), 1
            for column in both:
                groups, size = refine(groups, matrix[together, column])
            row_groups, base_groups = groups[:len(pattern_rows)], groups[len(pattern_rows):]
            per_group = np.bincount(base_groups, minlength=size)
            first = np.full(size, -1, dtype=np.intp)
            first[base_groups[::-1]] = pattern_bases[::-1]
            hits = per_group[row_groups]
            found[pattern_rows] += hits
            chosen[pattern_rows] = np.where(hits > 0, first[row_groups], chosen[pattern_rows])
    missing = np.flatnonzero(found == 0)
    if len(missing):
        raise _no_baseline(rows, int(missing[0]), bases, compared, matrix, request)
    several = np.flatnonzero(found > 1)
    if len(several):
        raise _several(rows, int(several[0]), bases, compared, matrix, request)
    return chosen


def shared_keys(rows: Rows, chosen: np.ndarray, compared_keys: Collection[str]) -> list[str]:
    """The compared keys that some row and its baseline both have (in row-key order)."""
    return [key for index, key in enumerate(rows.keys) if key in compared_keys and bool(
        ((rows.codes[index] != 0) & (rows.codes[index][chosen] != 0)).any())]


def speedups(times: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """Per row, its baseline's time over its own (NaN where either has none)."""
    ratio = np.full(len(times), np.nan)
    base = times[chosen]
    usable = (times > 0) & (base > 0)
    ratio[usable] = base[usable] / times[usable]
    return ratio


def _no_baseline(rows: Rows, row: int, bases: np.ndarray, compared: list[int],
                 matrix: np.ndarray, request: str) -> ResultsError:
    """The row has no baseline: name the keys in which the nearest baseline row differs."""
    has = matrix != 0
    differs = (matrix[bases] != matrix[row]) & has[bases] & has[row]
    closest = int(np.argmin(differs.sum(axis=1)))
    nearest = int(bases[closest])
    keys = [compared[column] for column in np.flatnonzero(differs[closest]).tolist()]
    described = ", ".join(f"{rows.keys[index]} {as_text(rows.value(index, nearest))}, not "
                          f"{as_text(rows.value(index, row))}" for index in keys)
    suggestion = " ".join(_option(rows, index, nearest) for index in keys)
    return ResultsError(
        f"--baseline {request}: the row ({rows.describe(row)}) has no baseline row: the "
        f"nearest baseline row has {described}",
        hint=f"name the baseline's value of those keys too ({suggestion}), so that rows may "
             "differ from it there, or leave such rows out with --filter KEY=GLOB")


def _several(rows: Rows, row: int, bases: np.ndarray, compared: list[int],
             matrix: np.ndarray, request: str) -> ResultsError:
    """The row has several baseline rows: name the keys in which they differ."""
    has = matrix != 0
    agree = ((matrix[bases] == matrix[row]) | ~has[bases] | ~has[row]).all(axis=1)
    candidates = bases[agree]
    differing = []
    for index, key in enumerate(rows.keys):
        codes = np.asarray(rows.codes[index])[candidates]
        if key != EXP_ID and (codes != codes[0]).any():
            values = sorted({as_text(rows.value(index, int(c))) or "-" for c in candidates})
            differing.append((index, values))
    if differing:
        described = ", ".join(f"{rows.keys[index]} ({', '.join(values)})"
                              for index, values in differing)
        # The first key may decide alone (the framework); name a value that a candidate has.
        first = differing[0][0]
        suggestion = _option(rows, first, int(next(
            (c for c in candidates if rows.codes[first][c] != 0), candidates[0])))
        return ResultsError(
            f"--baseline {request}: the row ({rows.describe(row)}) has {len(candidates)} "
            f"baseline rows, which differ in {described}",
            hint=f"name the baseline's value of those keys too, e.g. {suggestion}")
    return ResultsError(
        f"--baseline {request}: the row ({rows.describe(row)}) has {len(candidates)} "
        "baseline rows, which differ only in exp.id",
        hint="keep one of them with --filter exp.id=ID")


def _option(rows: Rows, key_index: int, row: int) -> str:
    """`--baseline KEY=VALUE` naming row `row`'s value, quoted for a shell where needed."""
    text = f"{rows.keys[key_index]}={as_text(rows.value(key_index, row))}"
    return f"--baseline {shlex.quote(text)}"
