"""From attempts to experiments: filters, duplicates, grouping, which attempts count.

A cell of a report holds one experiment; the experiment's ok attempts are its measurements
(`--latest`: only its newest attempt, when that is ok). The same attempt read twice (from its
log and from the results database, or from two copies of a folder) counts once.
"""

from __future__ import annotations

import fnmatch
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dlbs.errors import ResultsError
from dlbs.report.identity import KeyRules, experiment_identity, value_of
from dlbs.results.sources import Record
from dlbs.util import exact_json


@dataclass(frozen=True)
class Filter:
    """`KEY=PATTERN`: keep attempts whose KEY, as text, matches the glob PATTERN."""

    key: str
    pattern: str

    @classmethod
    def parse(cls, text: str) -> Filter:
        """`exp.model=resnet*`; `model=...` means `exp.model`, `env.x=...` the environment."""
        key, sep, pattern = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ResultsError(f"--filter {text!r} is not KEY=PATTERN",
                               hint="e.g. --filter exp.model='resnet*'")
        return cls(key, pattern)


def as_text(value: Any) -> str:
    """How a value is matched and shown: JSON for lists, objects and booleans, '' for None."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return exact_json.dumps(value)


def resolve_key(key: str, records: Sequence[Record]) -> str:
    """`key` as the records spell it: `model` finds `exp.model`, `time` `results.time`."""
    if "." in key and (key.startswith("env.") or any(key in r.experiment for r in records)):
        return key
    for candidate in (key, f"exp.{key}", f"results.{key}"):
        if any(candidate in record.experiment for record in records):
            return candidate
    if key.startswith("env."):
        return key
    raise ResultsError(f"no experiment has a key {key!r}",
                       hint="`dlbs parse LOGS` shows every key of every experiment")


def apply_filters(records: Sequence[Record], filters: Sequence[Filter]) -> list[Record]:
    """Attempts that match every key's patterns (one of them, when a key is given twice)."""
    if not filters:
        return list(records)
    patterns: dict[str, list[str]] = {}
    for item in filters:
        patterns.setdefault(resolve_key(item.key, records), []).append(item.pattern)
    kept = []
    for record in records:
        if all(any(fnmatch.fnmatchcase(as_text(value_of(record, key)), pattern)
                   for pattern in globs) for key, globs in patterns.items()):
            kept.append(record)
    return kept


def without_duplicates(records: Iterable[Record]) -> tuple[list[Record], int]:
    """Each attempt once: the same experiment's same log file read twice counts once."""
    records = list(records)
    if len({record.source for record in records}) < 2:
        return records, 0   # one database (or one file) holds each attempt once
    seen: set[tuple[Any, ...]] = set()
    kept = []
    dropped = 0
    for record in records:
        experiment = record.experiment
        log = experiment.get("results.log_file")
        if log is None:
            kept.append(record)
            continue
        key = (experiment.get("exp.id"), os.path.basename(str(log)),
               experiment.get("results.end_time"))
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        kept.append(record)
    return kept, dropped


@dataclass
class Experiment:
    """Every attempt of one experiment that the inputs hold, oldest first."""

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

    def ok_attempts(self, latest_only: bool) -> list[Record]:
        """The attempts a report measures: every ok one, or only the newest if it is ok."""
        if latest_only:
            return [self.latest] if self.status == "ok" else []
        return [a for a in self.attempts if a.experiment.get("results.status") == "ok"]


def group_experiments(records: Sequence[Record], rules: KeyRules) -> list[Experiment]:
    """Attempts grouped by experiment (id and device model), in first-seen order."""
    groups: dict[tuple[Any, ...], Experiment] = {}
    for record in records:
        identity = experiment_identity(record, rules)
        group = groups.get(identity)
        if group is None:
            group = groups[identity] = Experiment(identity)
        group.attempts.append(record)
    for group in groups.values():
        if len(group.attempts) > 1:
            group.attempts.sort(key=lambda r: r.recency)  # stable: ties stay in read order
    return list(groups.values())


@dataclass
class Selection:
    """The experiments a report measures, and what it leaves out and why."""

    measured: list[tuple[Experiment, list[Record]]] = field(default_factory=list)
    # Latest status -> experiments without an ok attempt to show.
    not_counted: Counter[str] = field(default_factory=Counter)
    # Experiments shown with earlier ok attempts although their newest is not ok.
    latest_not_ok: int = 0
    duplicates: int = 0
    # Experiments whose newest attempt is not ok (shown or not), for their reasons.
    failed: list[Experiment] = field(default_factory=list)


def select(records: Sequence[Record], rules: KeyRules, filters: Sequence[Filter] = (),
           latest_only: bool = False) -> Selection:
    """Filter, de-duplicate and group `records`; split measured from not counted."""
    unique, duplicates = without_duplicates(apply_filters(records, filters))
    selection = Selection(duplicates=duplicates)
    for experiment in group_experiments(unique, rules):
        attempts = experiment.ok_attempts(latest_only)
        if experiment.status != "ok":
            selection.failed.append(experiment)
        if not attempts:
            selection.not_counted[experiment.status] += 1
            continue
        if experiment.status != "ok":
            selection.latest_not_ok += 1
        selection.measured.append((experiment, attempts))
    return selection
