"""One series per configuration, one point per run tag.

A *configuration* is what a report row is: an experiment (`exp.id`) on one device model
(dlbs/report/identity.py), unless `--by` names the keys that make one (`--by
exp.model,exp.replica_batch,env.host`). Like a report's `--by`, those keys must tell the
experiments apart: when another identity parameter varies within one of them (a batch size
under `--by exp.model`), one series would join different experiments, and the history is
refused with the keys to add.

A *point* is the newest ok attempt of the configuration under one `runtime.run_tag` (a tag
names a run: tonight's, a commit, a framework version); an attempt recorded without a tag
is a point of its own. Points are in the order they ended. Runs are never averaged: each
point is one attempt's value of the metric (default `results.time_median`, the median batch
time), and a value below zero is no value.

What a point cannot say is kept beside the series, never dropped without a word:
- the configuration's *newest run* (the tag of its newest ended attempt) may have no point:
  its attempts failed, or gave no valid value. That run is the series' `problem`, and
  `check` calls the configuration failed;
- an attempt that ended after the time of reading (plus FUTURE_SLACK) comes from a host
  whose clock is wrong; where it lies among the others is unknown, so it is no point (it
  would stay "the newest" and mask every later run) and is listed in `History.future`.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.report import keys as keys_module
from dlbs.report.identity import DEVICE_MODEL, column_of, key_rules
from dlbs.report.select import Filter, as_text, matching, resolve_key, statuses
from dlbs.results.columns import Attempts
from dlbs.results.schema import SUMMARY_COLUMN_KEYS

TAG_KEY = "runtime.run_tag"
HOST_KEY = "env.host"
DEFAULT_METRIC = "results.time_median"
# Metrics where more is better; for every other one (times) less is better.
HIGHER_IS_BETTER = ("results.throughput",)
# An attempt that ended more than this after the time of reading is dated in the future.
FUTURE_SLACK = 3600.0
OK, STARTED = "ok", "started"


class MixedExperiments(ResultsError):
    """`--by` keys under which one series would join experiments; `by`: the keys that work."""

    def __init__(self, message: str, hint: str, by: Sequence[str]) -> None:
        super().__init__(message, hint)
        self.by = list(by)


@dataclass(frozen=True)
class Attempted:
    """One attempt named by what a user reads: its experiment, tag, host and end."""

    exp_id: str
    tag: str | None
    host: Any
    ended: float
    status: str
    reason: str


@dataclass
class Series:
    """The points of one configuration, oldest first."""

    shown: tuple[Any, ...]           # the values of History.keys
    exp_ids: list[str]
    tags: list[str | None]
    ended: np.ndarray                # seconds since the epoch
    values: np.ndarray               # the metric
    rows: np.ndarray                 # the attempts (indices into History.attempts)
    hosts: list[Any] = field(default_factory=list)
    # The newest run when it has no point (failed, or no valid value); see the module.
    problem: Attempted | None = None


@dataclass
class History:
    """Every configuration's points, and how to read them.

    The points are arrays, configuration after configuration (oldest first within one):
    `starts[i]:starts[i + 1]` are configuration i's. `series` makes the objects of all,
    `one(i)` of one (a page shows a few of many thousands).
    """

    metric: str
    keys: list[str]
    attempts: Attempts | None = None
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ended: np.ndarray = field(default_factory=lambda: np.zeros(0))
    starts: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.intp))
    problems: dict[int, Attempted] = field(default_factory=dict)
    # Attempts left out: dated in the future; ok but with a value below zero.
    future: list[Attempted] = field(default_factory=list)
    invalid: int = 0
    # Attempts the filters kept (ended ones), and configurations that never gave a point.
    matched: int = 0
    without_points: int = 0
    _made: dict[int, Series] = field(default_factory=dict, repr=False)

    @property
    def higher_is_better(self) -> bool:
        """Whether a larger value of the metric is an improvement."""
        return self.metric in HIGHER_IS_BETTER

    @property
    def size(self) -> int:
        """How many configurations."""
        return len(self.starts) - 1

    @property
    def series(self) -> list[Series]:
        """Every configuration's series, in order."""
        if len(self._made) < self.size:
            self._make_all()
        return [self._made[index] for index in range(self.size)]

    @property
    def point_count(self) -> int:
        """How many points in all."""
        return len(self.values)

    def one(self, index: int) -> Series:
        """Configuration `index`'s series."""
        if not 0 <= index < self.size:
            raise IndexError(index)
        found = self._made.get(index)
        if found is None:
            found = self._made[index] = self._series(index)
        return found

    def _make_all(self) -> None:
        """Every series at once: each key's values looked up once for all points."""
        assert self.attempts is not None
        ids, tags, hosts = (_values(self.attempts, key, self.rows)
                            for key in ("exp.id", TAG_KEY, HOST_KEY))
        lasts = self.rows[self.starts[1:] - 1]
        shown = list(zip(*(_values(self.attempts, key, lasts) for key in self.keys))) \
            if self.keys else [()] * self.size
        bounds = self.starts.tolist()
        for index, (start, stop) in enumerate(zip(bounds, bounds[1:])):
            if index not in self._made:
                self._made[index] = Series(
                    shown=tuple(shown[index]), exp_ids=[str(v) for v in ids[start:stop]],
                    tags=tags[start:stop], ended=self.ended[start:stop],
                    values=self.values[start:stop], rows=self.rows[start:stop],
                    hosts=hosts[start:stop], problem=self.problems.get(index))

    def _series(self, index: int) -> Series:
        assert self.attempts is not None
        members = self.rows[self.starts[index]:self.starts[index + 1]]
        last = int(members[-1])
        shown = tuple(_value(self.attempts, key, last) for key in self.keys)
        return Series(shown=shown, exp_ids=[str(v) for v in _values(self.attempts, "exp.id",
                                                                      members)],
                      tags=_values(self.attempts, TAG_KEY, members),
                      ended=self.ended[self.starts[index]:self.starts[index + 1]],
                      values=self.values[self.starts[index]:self.starts[index + 1]],
                      rows=members, hosts=_values(self.attempts, HOST_KEY, members),
                      problem=self.problems.get(index))


def build_history(attempts: Attempts, by: Sequence[str] | None = None,
                  filters: Sequence[Filter] = (), metric: str = DEFAULT_METRIC,
                  now: float | None = None) -> History:
    """The history of every configuration of `attempts` (see the module).

    `now`: the time of reading (seconds since the epoch), which tells the future apart.
    """
    metric = metric_key(attempts, metric)
    rows = np.flatnonzero(matching(attempts, filters)) if filters else \
        np.arange(attempts.size)
    codes, names = statuses(attempts)
    status = np.array(names, dtype=object)[codes[rows]] if len(rows) else \
        np.zeros(0, dtype=object)
    rows = rows[status != STARTED]            # running now, or cut off: not a run's result
    status = status[status != STARTED]
    recency = attempts.recency
    history = History(metric=metric, keys=[], attempts=attempts, matched=len(rows))
    limit = (time.time() if now is None else now) + FUTURE_SLACK
    future = recency[rows] > limit
    if future.any():
        history.future = _named(attempts, rows[future], status[future],
                                "ended after the time of reading: the host's clock is wrong")
        rows, status = rows[~future], status[~future]
    values = attempts.numbers(metric)[rows]
    is_ok = status == OK
    negative = is_ok & (values < 0)
    history.invalid = int(negative.sum())
    valid = is_ok & np.isfinite(values) & ~negative
    if by:
        history.keys = [resolve_key(key, attempts, rows) for key in by]
        _refuse_mixed(attempts, rows, history.keys, by)
        grouping = history.keys
    else:
        grouping = ["exp.id", DEVICE_MODEL]
    if not len(rows):
        return history
    configs = _group(attempts, grouping, rows)
    tags = column_of(attempts, TAG_KEY)
    tag_codes = tags.codes[rows].astype(np.int64)
    # An attempt without a tag is a run of its own: a code no tag has.
    untagged = tag_codes == 0
    tag_codes[untagged] = -1 - np.arange(int(untagged.sum()))
    when = recency[rows]
    # Newest first within (configuration, tag): the first valid one of each pair is its point.
    order = np.lexsort((-np.arange(len(rows)), -when, tag_codes, configs))
    order = order[valid[order]]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (configs[order][1:] != configs[order][:-1]) | \
        (tag_codes[order][1:] != tag_codes[order][:-1])
    points = order[first]
    points = points[np.lexsort((points, when[points], configs[points]))]
    with_points = np.unique(configs[points])
    history.without_points = len(np.unique(configs)) - len(with_points)
    starts = np.flatnonzero(np.r_[True, configs[points][1:] != configs[points][:-1]]) \
        if len(points) else np.zeros(0, dtype=np.intp)
    history.starts = np.r_[starts, len(points)].astype(np.intp)
    history.rows = rows[points]
    history.values = values[points]
    history.ended = when[points]
    _newest_runs(history, attempts, rows, status, values, configs, tag_codes, when,
                 with_points, points)
    if not by and len(points):
        history.keys = _shown_keys(attempts, history.rows[history.starts[1:] - 1])
    return history


def metric_key(attempts: Attempts, metric: str) -> str:
    """`metric` as a results key that some attempt has (`time_median` is results.time_median).

    A key no attempt has is refused, with the nearest names: a misspelt metric would
    judge nothing.
    """
    key = metric if metric.startswith("results.") else f"results.{metric}"
    if not attempts.size or attempts.has_key(key):
        return key
    # The summary's values are columns of a store, not keys of its attempts' views.
    candidates = {*SUMMARY_COLUMN_KEYS.values(),
                  *(name for name in attempts.keys() if name.startswith("results."))}
    known = sorted(name for name in candidates if np.isfinite(attempts.numbers(name)).any())
    near = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    shown = near or [name for name in known if name.startswith("results.time")][:6]
    raise ResultsError(f"--metric {metric}: no attempt has a value {key}",
                       hint="values: " + ", ".join(name.removeprefix("results.")
                                                   for name in shown) if shown else None)


def _newest_runs(history: History, attempts: Attempts, rows: np.ndarray, status: np.ndarray,
                 values: np.ndarray, configs: np.ndarray, tag_codes: np.ndarray,
                 when: np.ndarray, with_points: np.ndarray, points: np.ndarray) -> None:
    """Each configuration's newest run without a point: its `problems` entry."""
    newest = np.lexsort((np.arange(len(rows)), when, configs))
    last = newest[np.r_[configs[newest][1:] != configs[newest][:-1], True]]
    index_of = {int(config): index for index, config in enumerate(with_points.tolist())}
    has_point = {(int(c), int(t)) for c, t in zip(configs[points].tolist(),
                                                   tag_codes[points].tolist())}
    for position in last.tolist():
        config = int(configs[position])
        if config not in index_of or (config, int(tag_codes[position])) in has_point:
            continue
        value = float(values[position])
        why = ("it ended " + str(status[position]) if status[position] != OK else
               f"it has no value of {history.metric}" if np.isnan(value) else
               f"{history.metric} is {value!r}")
        [named] = _named(attempts, rows[[position]], status[[position]], why)
        history.problems[index_of[config]] = named


def _named(attempts: Attempts, rows: np.ndarray, status: np.ndarray,
           reason: str) -> list[Attempted]:
    messages = _values(attempts, "results.status_msg", rows)
    return [Attempted(str(exp_id), tag, host, float(ended), str(state),
                      reason + (f" ({as_text(message)})" if message else ""))
            for exp_id, tag, host, ended, state, message in zip(
                _values(attempts, "exp.id", rows), _values(attempts, TAG_KEY, rows),
                _values(attempts, HOST_KEY, rows), attempts.recency[rows].tolist(),
                status.tolist(), messages)]


def _values(attempts: Attempts, key: str, rows: np.ndarray) -> list[Any]:
    column = column_of(attempts, key)
    values = column.values   # decoded once (a property)
    return [values[code] for code in column.codes[rows].tolist()]


def _value(attempts: Attempts, key: str, row: int) -> Any:
    column = column_of(attempts, key)
    return column.values[column.codes[row]]


def _group(attempts: Attempts, keys: Sequence[str], rows: np.ndarray) -> np.ndarray:
    """A number per attempt of `rows`, equal where every key's value is."""
    if not keys:
        raise ResultsError("--by needs at least one key")
    stacked = np.stack([column_of(attempts, key).codes[rows].astype(np.int64)
                        for key in keys])
    _, inverse = np.unique(stacked, axis=1, return_inverse=True)
    return inverse.reshape(-1)


def _refuse_mixed(attempts: Attempts, rows: np.ndarray, keys: list[str],
                  given: Sequence[str]) -> None:
    """Refuse `--by` keys under which one series would join different experiments."""
    if not len(rows):
        return
    rules = key_rules(attempts)
    values_of = keys_module.value_lists(attempts, rows)
    others = [key for key in keys_module.identity_keys(attempts, rows, rules)
              if key not in keys]
    loose = keys_module.loose_keys(len(rows), keys, others, rules, values_of)
    if not loose:
        return
    described = ", ".join(f"{key} ({keys_module.distinct(values_of(key))} values)"
                          for key in loose)
    raise MixedExperiments(
        f"--by {','.join(given)}: one series would join different experiments: "
        f"{described} also vary within a configuration",
        f"group by them too (--by {','.join([*given, *loose])}), or keep one value with "
        "--filter KEY=VALUE", [*given, *loose])


def _shown_keys(attempts: Attempts, rows: np.ndarray) -> list[str]:
    """What tells the configurations (one attempt each: `rows`) apart, as report rows do.

    The identity keys that vary, fewest first in the reports' order of preference; exp.id
    where they do not tell every configuration apart.
    """
    rules = key_rules()
    values_of = keys_module.value_lists(attempts, rows)
    varying = keys_module.varying_keys(
        values_of, keys_module.identity_keys(attempts, rows, rules), attempts)
    chosen = keys_module.display_order(keys_module.choose(
        len(rows), keys_module.preference(varying, rules), [], values_of))
    shown = np.stack([values_of(key) for key in chosen] or [np.zeros(len(rows), dtype=np.intp)])
    if not chosen or np.unique(shown, axis=1).shape[1] < len(rows):
        chosen.append("exp.id")
    return chosen
