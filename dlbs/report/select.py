"""From attempts to experiments: filters, duplicates, grouping, which attempts count.

A cell of a report holds one run (an ok attempt) of one experiment: its newest ok run, or
with `--runs each` every ok run in a cell of its own; values of different runs are never
combined (runs.py says when they disagree). `--latest` counts only an experiment's newest
attempt, when that is ok. The same attempt read twice (from its log and from the results
database, or from two copies of a folder) counts once.

Everything here works on columns (results/columns.py): attempts are numbered, experiments
are numbered in the order they were first read, and a selection is arrays of those numbers.
"""

from __future__ import annotations

import fnmatch
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.report.identity import (
    KeyRules,
    column_of,
    experiment_codes,
    experiment_identity,
    per_code,
)
from dlbs.results.columns import Attempts, Record
from dlbs.results.output import csv_cell


@dataclass(frozen=True)
class Filter:
    """`KEY=PATTERN`: keep attempts whose KEY, as text, matches the glob PATTERN."""

    key: str
    pattern: str

    @classmethod
    def parse(cls, text: str, option: str = "--filter") -> Filter:
        """`exp.model=resnet*`; `model=...` means `exp.model`, `env.x=...` the environment."""
        key, sep, pattern = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ResultsError(f"{option} {text!r} is not KEY=PATTERN",
                               hint=f"e.g. {option} exp.model='resnet*'")
        return cls(key, pattern)


def literal(text: str) -> str:
    """A glob pattern that matches `text` only (its *, ? and [ taken literally)."""
    return "".join(f"[{char}]" if char in "*?[" else char for char in text)


#: How a value is matched and shown: JSON for lists, objects and booleans, '' for None (the
#: same text as a CSV cell of it).
as_text = csv_cell


def resolve_key(key: str, attempts: Attempts, rows: np.ndarray | None = None) -> str:
    """`key` as the attempts (`rows` of them) spell it: `model` finds `exp.model`."""
    def known(name: str) -> bool:
        if rows is None:
            return attempts.has_key(name)
        if name.startswith("results."):
            return bool(attempts.has_value(name)[rows].any())
        return bool(attempts.present(name)[rows].any())

    if "." in key and (key.startswith("env.") or known(key)):
        return key
    for candidate in (key, f"exp.{key}", f"results.{key}"):
        if known(candidate):
            return candidate
    if key.startswith("env."):
        return key
    raise ResultsError(f"no experiment has a key {key!r}",
                       hint="`dlbs parse LOGS` shows every key of every experiment")


def apply_filters(attempts: Attempts, filters: Sequence[Filter]) -> np.ndarray:
    """Indices of the attempts that match every key's patterns (either, for a key twice)."""
    return np.flatnonzero(matching(attempts, filters))


def matching(attempts: Attempts, filters: Sequence[Filter],
             rows: np.ndarray | None = None) -> np.ndarray:
    """Whether each attempt (of `rows`, else all) matches every key's patterns (see Filter)."""
    kept = np.ones(attempts.size if rows is None else len(rows), dtype=bool)
    patterns: dict[str, list[str]] = {}
    for item in filters:
        patterns.setdefault(resolve_key(item.key, attempts), []).append(item.pattern)
    for key, globs in patterns.items():
        column = column_of(attempts, key)
        matches = per_code(column, lambda value, globs=globs: any(
            fnmatch.fnmatchcase(as_text(value), pattern) for pattern in globs), bool)
        kept &= matches[column.codes if rows is None else column.codes[rows]]
    return kept


def without_duplicates(attempts: Attempts) -> tuple[np.ndarray, int]:
    """Each attempt once: the indices kept, and how many were dropped.

    The same experiment's same log file, ended at the same time, read twice counts once.
    """
    everything = np.arange(attempts.size)
    if len(np.unique(attempts.sources()[0])) < 2:
        return everything, 0   # one database (or one file) holds each attempt once
    logs = column_of(attempts, "results.log_file")
    names = per_code(logs, lambda value: None if value is None
                     else os.path.basename(str(value)))
    with_log = np.flatnonzero(logs.codes != 0)
    if not len(with_log):
        return everything, 0
    key = np.stack([column_of(attempts, "exp.id").codes[with_log],
                    _codes_of(names)[logs.codes[with_log]],
                    column_of(attempts, "results.end_time").codes[with_log]], axis=1)
    _, first = np.unique(key, axis=0, return_index=True)
    dropped = np.setdiff1d(with_log, with_log[first])
    return np.setdiff1d(everything, dropped), len(dropped)


def _codes_of(values: np.ndarray) -> np.ndarray:
    """Equal values get equal numbers."""
    table: dict[Any, int] = {}
    return np.array([table.setdefault(value, len(table)) for value in values.tolist()],
                    dtype=np.intp)


@dataclass
class Experiment:
    """Every attempt of one experiment that the inputs hold, oldest first (as records)."""

    identity: tuple[Any, ...]
    attempts: list[Record] = field(default_factory=list)

    @property
    def latest(self) -> Record:
        """The newest attempt (by when it ended; ties go to the one read later)."""
        return self.attempts[-1]

    @property
    def status(self) -> str:
        """The newest attempt's status."""
        return str(self.latest.experiment.get("results.status", "failure"))


@dataclass
class Selection:
    """The experiments a report measures, and what it leaves out and why.

    Experiments are numbered in the order they were first read. `order` lists the attempts
    (indices into `attempts`) experiment by experiment, oldest first, `starts[e]` where
    experiment e begins in it. `measured` are the experiments with attempts to show;
    `members` their measured attempts, the experiment's ok runs (oldest first),
    `member_starts[m]` where the m-th measured experiment's begin.

    `shown_runs` makes one *unit* (a report's cell) per run to show; then `measured[u]` is
    unit u's experiment, `members[u]` its run (`member_starts` counts one each), `run[u]`
    that run's number among its experiment's ok runs (1: the oldest), and `runs`,
    `run_starts`, `run_of` give every ok run of unit u's experiment: `runs[run_starts[k]:
    run_starts[k + 1]]` with k = `run_of[u]`.
    """

    attempts: Attempts
    rules: KeyRules
    order: np.ndarray
    starts: np.ndarray
    measured: np.ndarray
    members: np.ndarray
    member_starts: np.ndarray
    # Latest status -> experiments without an ok attempt to show.
    not_counted: Counter[str] = field(default_factory=Counter)
    # Experiments shown with earlier ok attempts although their newest is not ok.
    latest_not_ok: int = 0
    duplicates: int = 0
    # Experiments whose newest attempt is not ok (shown or not), for their reasons.
    failed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    # After shown_runs (see the class): each unit's run number, and every run of its
    # experiment.
    run: np.ndarray | None = None
    runs: np.ndarray | None = None
    run_starts: np.ndarray | None = None
    run_of: np.ndarray | None = None

    @property
    def representatives(self) -> np.ndarray:
        """The newest measured attempt of each measured experiment."""
        return self.members[self.member_starts[1:] - 1]

    @property
    def counts(self) -> np.ndarray:
        """How many measured attempts each measured experiment has."""
        return np.diff(self.member_starts)

    def take(self, keep: np.ndarray) -> Selection:
        """Only the measured experiments (units) `keep` (booleans, one each)."""
        counts = self.counts[keep]
        starts = self.member_starts[:-1][keep]
        bounds = _bounds(counts)
        # Each kept experiment's members, in order: position i of the result is member
        # starts[e] + (i - bounds[e]) of the experiment e it falls in.
        members = self.members[np.arange(bounds[-1]) + np.repeat(starts - bounds[:-1],
                                                                 counts)]
        return Selection(self.attempts, self.rules, self.order, self.starts,
                         self.measured[keep], members, bounds, self.not_counted,
                         self.latest_not_ok, self.duplicates, self.failed,
                         None if self.run is None else self.run[keep], self.runs,
                         self.run_starts, None if self.run_of is None else self.run_of[keep])

    def shown_runs(self, each: bool = False) -> Selection:
        """One unit per run to show: each experiment's newest ok run, or `each` of them."""
        counts = self.counts
        experiments = np.arange(len(counts))
        if each:
            run_of = np.repeat(experiments, counts)
            run = np.arange(len(self.members)) - self.member_starts[:-1][run_of] + 1
            members = self.members
        else:
            run_of, run = experiments, counts.copy()
            members = self.representatives
        return Selection(self.attempts, self.rules, self.order, self.starts,
                         self.measured[run_of], members, _bounds(np.ones(len(members),
                                                                         dtype=np.intp)),
                         self.not_counted, self.latest_not_ok, self.duplicates, self.failed,
                         run, self.members, self.member_starts, run_of)

    @property
    def run_counts(self) -> np.ndarray:
        """How many ok runs each unit's experiment has (after shown_runs)."""
        assert self.run_starts is not None and self.run_of is not None
        return np.diff(self.run_starts)[self.run_of]

    def experiment(self, number: int) -> Experiment:
        """Experiment `number` with its attempts as records."""
        records = self.attempts.records(self.order[self.starts[number]:self.starts[number + 1]])
        return Experiment(experiment_identity(records[-1], self.rules), records)

    def member_records(self, measured: int) -> list[Record]:
        """The measured attempts of the `measured`-th measured experiment, as records."""
        start, stop = self.member_starts[measured], self.member_starts[measured + 1]
        return self.attempts.records(self.members[start:stop])


def _bounds(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.intp)


def statuses(attempts: Attempts) -> tuple[np.ndarray, list[str]]:
    """Each attempt's status as text (`failure` without one), as codes into names."""
    column = column_of(attempts, "results.status")
    names = [str(value) for value in column.values]
    names[0] = "None"
    codes = column.codes.copy()
    absent = ~column.has()
    if absent.any():
        names.append("failure")
        codes[absent] = len(names) - 1
    return codes, names


def select(attempts: Attempts, rules: KeyRules, filters: Sequence[Filter] = (),
           latest_only: bool = False) -> Selection:
    """Filter, de-duplicate and group `attempts`; split measured from not counted."""
    attempts = attempts.take(apply_filters(attempts, filters)) if filters else attempts
    unique, duplicates = without_duplicates(attempts)
    if duplicates:
        attempts = attempts.take(unique)
    size = attempts.size
    # Experiments numbered by first appearance; attempts ordered by experiment, then time.
    _, first, inverse = np.unique(experiment_codes(attempts, rules), return_index=True,
                                  return_inverse=True)
    rank = np.empty(len(first), dtype=np.intp)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    experiment_of = rank[inverse.reshape(-1)] if size else np.zeros(0, dtype=np.intp)
    order = np.lexsort((np.arange(size), attempts.recency, experiment_of))
    starts = _bounds(np.bincount(experiment_of, minlength=len(first)))
    codes, names = statuses(attempts)
    ok_name = names.index("ok") if "ok" in names else -1
    latest = order[starts[1:] - 1]
    latest_status = codes[latest]
    latest_ok = latest_status == ok_name
    if latest_only:
        counted = np.zeros(size, dtype=bool)
        counted[latest[latest_ok]] = True
    else:
        counted = codes == ok_name
    counted_in_order = counted[order]
    per_experiment = np.bincount(experiment_of[order][counted_in_order], minlength=len(first))
    measured = np.flatnonzero(per_experiment > 0)
    not_counted: Counter[str] = Counter()
    for code, count in zip(*np.unique(latest_status[per_experiment == 0], return_counts=True)):
        not_counted[names[code]] = int(count)
    return Selection(
        attempts, rules, order, starts, measured, order[counted_in_order],
        _bounds(per_experiment[measured]), not_counted,
        int(np.count_nonzero(~latest_ok[measured])), duplicates,
        np.flatnonzero(~latest_ok))
