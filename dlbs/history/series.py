"""One series per configuration, one point per run tag.

A *configuration* is what a report row is: an experiment (`exp.id`) on one device model
(dlbs/report/identity.py), unless `--by` names the keys that make one (`--by
exp.model,exp.replica_batch,env.host`). A *point* is the newest ok attempt of the
configuration under one `runtime.run_tag` (a tag names a run: tonight's, a commit, a
framework version); an attempt recorded without a tag is a point of its own. Points are in
the order they ended. Runs are never averaged: each point is one attempt's value of the
metric (default `results.time_median`, the median batch time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.report.identity import DEVICE_MODEL, column_of, key_rules
from dlbs.report.keys import (
    choose,
    display_order,
    identity_keys,
    preference,
    value_lists,
    varying_keys,
)
from dlbs.report.select import Filter, matching, resolve_key
from dlbs.results.columns import Attempts

TAG_KEY = "runtime.run_tag"
DEFAULT_METRIC = "results.time_median"
# Metrics where more is better; for every other one (times) less is better.
HIGHER_IS_BETTER = ("results.throughput",)


@dataclass
class Series:
    """The points of one configuration, oldest first."""

    shown: tuple[Any, ...]           # the values of History.keys
    exp_ids: list[str]
    tags: list[str | None]
    ended: np.ndarray                # seconds since the epoch
    values: np.ndarray               # the metric
    rows: np.ndarray                 # the attempts (indices into History.attempts)


@dataclass
class History:
    """Every configuration's series, and how to read them."""

    metric: str
    keys: list[str]
    series: list[Series] = field(default_factory=list)
    attempts: Attempts | None = None

    @property
    def higher_is_better(self) -> bool:
        """Whether a larger value of the metric is an improvement."""
        return self.metric in HIGHER_IS_BETTER


def build_history(attempts: Attempts, by: Sequence[str] | None = None,
                  filters: Sequence[Filter] = (), metric: str = DEFAULT_METRIC) -> History:
    """The history of every configuration of `attempts` (see the module)."""
    if not metric.startswith("results."):
        metric = f"results.{metric}"
    rows = np.flatnonzero(matching(attempts, filters)) if filters else \
        np.arange(attempts.size)
    status = column_of(attempts, "results.status")
    ok_code = status.find("ok")
    values = attempts.numbers(metric)
    keep = np.isfinite(values[rows])
    keep &= status.codes[rows] == (-1 if ok_code is None else ok_code)
    rows = rows[keep]
    if by:
        keys = [resolve_key(key, attempts, rows) for key in by]
        grouping = keys
    else:
        grouping = ["exp.id", DEVICE_MODEL]
        keys = []
    history = History(metric=metric, keys=keys, attempts=attempts)
    if not len(rows):
        return history
    configs = _group(attempts, grouping, rows)
    tags = column_of(attempts, TAG_KEY)
    tag_codes = tags.codes[rows].astype(np.int64)
    # An attempt without a tag is a point of its own: a code no tag has.
    untagged = tag_codes == 0
    tag_codes[untagged] = -1 - np.arange(int(untagged.sum()))
    recency = attempts.recency[rows]
    # Newest first within (configuration, tag): the first of each pair is its point.
    order = np.lexsort((-recency, tag_codes, configs))
    first = np.ones(len(order), dtype=bool)
    first[1:] = (configs[order][1:] != configs[order][:-1]) | \
        (tag_codes[order][1:] != tag_codes[order][:-1])
    points = order[first]
    points = points[np.lexsort((recency[points], configs[points]))]
    starts = np.flatnonzero(np.r_[True, configs[points][1:] != configs[points][:-1]])
    if not by:
        history.keys = _shown_keys(attempts, rows[points[[*starts[1:] - 1, len(points) - 1]]])
    shown_columns = [column_of(attempts, key) for key in history.keys]
    ids = column_of(attempts, "exp.id")
    for start, stop in zip(starts, [*starts[1:], len(points)]):
        members = rows[points[start:stop]]
        last = int(members[-1])
        history.series.append(Series(
            shown=tuple(column.values[column.codes[last]] for column in shown_columns),
            exp_ids=[str(ids.values[code]) for code in ids.codes[members]],
            tags=[tags.values[code] for code in tags.codes[members]],
            ended=attempts.recency[members], values=values[members], rows=members))
    return history


def _group(attempts: Attempts, keys: Sequence[str], rows: np.ndarray) -> np.ndarray:
    """A number per attempt of `rows`, equal where every key's value is."""
    if not keys:
        raise ResultsError("--by needs at least one key")
    stacked = np.stack([column_of(attempts, key).codes[rows].astype(np.int64)
                        for key in keys])
    _, inverse = np.unique(stacked, axis=1, return_inverse=True)
    return inverse.reshape(-1)


def _shown_keys(attempts: Attempts, rows: np.ndarray) -> list[str]:
    """What tells the configurations (one attempt each: `rows`) apart, as report rows do.

    The identity keys that vary, fewest first in the reports' order of preference; exp.id
    where they do not tell every configuration apart.
    """
    rules = key_rules()
    values_of = value_lists(attempts, rows)
    varying = varying_keys(values_of, identity_keys(attempts, rows, rules), attempts)
    chosen = display_order(choose(len(rows), preference(varying, rules), [], values_of))
    shown = np.stack([values_of(key) for key in chosen] or [np.zeros(len(rows), dtype=np.intp)])
    if not chosen or np.unique(shown, axis=1).shape[1] < len(rows):
        chosen.append("exp.id")
    return chosen
