"""Two sets of results side by side: what got slower, what got faster, what now fails.

Experiments are matched on the identity parameters both sides have (identity.py), not on
`exp.id`, which changes when a new version of dlbs adds a parameter; the device model joins
the match when it varies within a side. The newest attempt of each experiment counts.

Per match: the median batch time of both sides, the relative change, and whether the
per-batch times differ significantly by SciPy's Mann-Whitney U test (two-sided). As in asv,
a change within the threshold is "same" whatever the test says (a real but tiny difference
is not a regression), and one beyond it counts only when the test says it is significant at
`alpha`: noise is never reported as a change. So the test runs only for the matches whose
change is beyond the threshold (vectorised over those with equal sample counts), and their
per-batch times are read only then. An ok experiment that now fails is a regression too.

`columns` (`dlbs compare --columns`) adds other values of both sides beside the batch time,
with their relative change: energy per sample, MFU, any value a report can show. They are
shown, not judged: the verdict stays the batch time's.

Matching, values and verdicts are arrays (results/columns.py): 100,000 matches take a
fraction of a second besides the tests themselves.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.report import keys as keys_module
from dlbs.report.identity import DEVICE_MODEL, KeyRules, column_of, key_rules, numbers_of
from dlbs.report.metrics import Metric, resolve, value_numbers
from dlbs.report.select import (
    Filter,
    apply_filters,
    as_text,
    literal,
    matching,
    resolve_key,
    select,
    statuses,
)
from dlbs.results.columns import Attempts, Record

VALUE_KEY = "results.time_median"
DEFAULT_THRESHOLD = 0.03
DEFAULT_ALPHA = 0.01
# Fewer per-batch times than this on a side: too few for the test to mean anything.
MIN_SAMPLES = 5

SLOWER, FASTER, SAME = "slower", "faster", "same"
NOT_SIGNIFICANT, UNTESTED = "not significant", "untested"
NOW_FAILS, NOW_OK, BOTH_FAIL, NO_VALUE = "now fails", "now ok", "both fail", "no value"
REGRESSIONS = (SLOWER, NOW_FAILS)
VERDICTS = (SAME, SLOWER, FASTER, NOT_SIGNIFICANT, UNTESTED, NOW_FAILS, NOW_OK, BOTH_FAIL,
            NO_VALUE)
_CODE = {verdict: code for code, verdict in enumerate(VERDICTS)}


TAG_KEY = "runtime.run_tag"


class Unmatched(ResultsError):
    """BASE and NEW have no experiment in common; `by` names keys that would match them."""

    def __init__(self, message: str, by: Sequence[str]) -> None:
        shown = ",".join(by)
        super().__init__(message, hint=f"match on fewer parameters: --by {shown}" if by else
                         "match on fewer parameters with --by KEY,KEY")
        self.by = list(by)


def tag_side(attempts: Attempts, tag: str, name: str) -> Attempts:
    """The attempts of `attempts` recorded under the run tag `tag` (exactly), as side `name`.

    A tag that no attempt has is refused with the tags there are, newest first.
    """
    kept = np.flatnonzero(matching(attempts, [Filter(TAG_KEY, literal(tag))]))
    if len(kept):
        return attempts.take(kept)
    tags = run_tags(attempts)
    shown = ", ".join(tags[:12]) + (f" and {len(tags) - 12} more" if len(tags) > 12 else "")
    raise ResultsError(f"{name}: no attempt has the run tag {tag!r}",
                       hint=f"its run tags, newest first: {shown}" if tags else
                       "its attempts were recorded without run tags (runtime.run_tag)")


def run_tags(attempts: Attempts) -> list[str]:
    """The run tags of `attempts`, the newest (by its newest attempt) first."""
    column = column_of(attempts, TAG_KEY)
    newest = np.full(len(column.values), -np.inf)
    np.maximum.at(newest, column.codes, attempts.recency)
    order = np.argsort(-newest, kind="stable")
    return [as_text(column.values[code]) for code in order.tolist()
            if code != 0 and np.isfinite(newest[code]) and column.values[code] != ""]


@dataclass
class Match:
    """One experiment on both sides."""

    shown: tuple[Any, ...]
    base_value: float | None = None
    new_value: float | None = None
    change: float | None = None       # new / base - 1 of the median batch time
    p_value: float | None = None
    verdict: str = SAME
    base_id: Any = None
    new_id: Any = None


@dataclass
class Comparison:
    """Matches, experiments on one side only, and the settings that judged them.

    Matches are arrays, one entry per match in BASE's order: per shown key the codes of its
    values (`shown_codes`, into `shown_tables`), the values, changes, p-values (NaN: none)
    and verdicts (codes into VERDICTS).
    """

    keys: list[str]
    threshold: float = DEFAULT_THRESHOLD
    alpha: float = DEFAULT_ALPHA
    # Constant parameters (and device models) that differ between the sides: (key, base, new).
    differences: list[tuple[str, Any, Any]] = field(default_factory=list)
    shown_codes: list[np.ndarray] = field(default_factory=list)
    shown_tables: list[list[Any]] = field(default_factory=list)
    base_value: np.ndarray = field(default_factory=lambda: np.zeros(0))
    new_value: np.ndarray = field(default_factory=lambda: np.zeros(0))
    change: np.ndarray = field(default_factory=lambda: np.zeros(0))
    p_value: np.ndarray = field(default_factory=lambda: np.zeros(0))
    verdict: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    base_only: list[tuple[Any, ...]] = field(default_factory=list)
    new_only: list[tuple[Any, ...]] = field(default_factory=list)
    # Both sides' newest attempts, and which of them each match pairs (for their ids).
    both: Attempts | None = field(default=None, repr=False)
    pairs: tuple[np.ndarray, np.ndarray] = field(
        default_factory=lambda: (np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)))
    # `columns`: each value's metric, and its numbers on both sides (NaN: none), per match.
    extra: list[tuple[Metric, np.ndarray, np.ndarray]] = field(default_factory=list)

    @property
    def size(self) -> int:
        """How many matches."""
        return len(self.verdict)

    @property
    def shown(self) -> list[list[Any]]:
        """Per shown key, the value of every match."""
        return [[table[code] for code in codes.tolist()]
                for codes, table in zip(self.shown_codes, self.shown_tables)]

    def ids(self) -> tuple[list[Any], list[Any]]:
        """The `exp.id` of both sides of every match."""
        if self.both is None:
            return [None] * self.size, [None] * self.size
        ids = column_of(self.both, "exp.id")
        return ([ids.values[code] for code in ids.codes[self.pairs[0]].tolist()],
                [ids.values[code] for code in ids.codes[self.pairs[1]].tolist()])

    @property
    def matches(self) -> list[Match]:
        """Every match as an object (in BASE's order)."""
        base_ids, new_ids = self.ids()
        return [Match(tuple(values[index] for values in self.shown),
                      _optional(self.base_value[index]), _optional(self.new_value[index]),
                      _optional(self.change[index]), _optional(self.p_value[index]),
                      VERDICTS[self.verdict[index]], base_ids[index], new_ids[index])
                for index in range(self.size)]

    @property
    def regressions(self) -> list[Match]:
        """Matches that got significantly slower than the threshold, or now fail."""
        return [match for match in self.matches if match.verdict in REGRESSIONS]

    @property
    def regression_count(self) -> int:
        """How many matches are regressions (without making the matches)."""
        return int(np.isin(self.verdict, [_CODE[verdict] for verdict in REGRESSIONS]).sum())

    def counts(self) -> Counter[str]:
        """Matches per verdict."""
        found: Counter[str] = Counter()
        for code, count in zip(*np.unique(self.verdict, return_counts=True)):
            found[VERDICTS[code]] = int(count)
        return found


def compare(base: Attempts | Sequence[Record], new: Attempts | Sequence[Record], *,
            by: Sequence[str] | None = None, filters: Sequence[Filter] = (),
            threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA,
            columns: Sequence[str] = ()) -> Comparison:
    """Match `base` and `new` (attempts with their per-batch times) and judge every match.

    `columns` name values shown beside the batch time (see the module).
    """
    if not (0 <= threshold < 10) or not math.isfinite(threshold):
        raise ResultsError(f"threshold {threshold!r} must be a fraction >= 0 (3% is 0.03)")
    if not 0 < alpha < 1:
        raise ResultsError(f"alpha {alpha!r} must be between 0 and 1")
    given = [side if isinstance(side, Attempts) else Attempts.of_records(side)
             for side in (base, new)]
    rules = key_rules(Attempts.concat(given))
    sides = [_latest(side, filters, rules) for side in given]
    for name, side in zip(("BASE", "NEW"), sides):
        if not side.size:
            raise ResultsError(f"{name} holds no experiments" + (" that match the filters"
                                                                 if filters else ""))
    keys, differences = _match_keys(sides, rules, by)
    both = Attempts.concat(sides)
    split = sides[0].size
    values_of = keys_module.value_lists(both, np.arange(both.size))
    comparison = Comparison(keys=[], threshold=threshold, alpha=alpha, differences=differences,
                            both=both)
    groups, _ = keys_module.partition(both.size, keys, values_of)
    side_groups = (groups[:split], groups[split:])
    for name, found in zip(("BASE", "NEW"), side_groups):
        if len(np.unique(found)) < len(found):
            raise ResultsError(
                f"{name} has two experiments that the match keys "
                f"({', '.join(keys) or 'none'}) cannot tell apart",
                hint="match on more keys with --by, or keep one with --filter")
    lead = ["exp.model"] if values_of("exp.model").any() else []
    shown_keys = keys_module.display_order(keys_module.choose(
        both.size, keys_module.preference([k for k in keys if k not in lead], rules), lead,
        values_of))
    comparison.keys = shown_keys
    in_new = np.isin(side_groups[0], side_groups[1])
    in_base = np.isin(side_groups[1], side_groups[0])
    base_positions = np.flatnonzero(in_new)
    position_in_new = {group: index for index, group in enumerate(side_groups[1].tolist())}
    new_positions = np.array([position_in_new[group] for group in
                              side_groups[0][base_positions].tolist()], dtype=np.intp) + split
    tables = [column_of(both, key).values for key in shown_keys]

    def rows(positions: np.ndarray) -> list[tuple[Any, ...]]:
        codes = [values_of(key)[positions].tolist() for key in shown_keys]
        return [tuple(table[code] for table, code in zip(tables, row)) for row in zip(*codes)] \
            if shown_keys else [() for _ in positions.tolist()]

    comparison.base_only = rows(np.flatnonzero(~in_new))
    comparison.new_only = rows(np.flatnonzero(~in_base) + split)
    if not len(base_positions):
        described = "; ".join(f"{key}: {as_text(a)!r} vs {as_text(b)!r}"
                              for key, a, b in differences) or "every experiment differs"
        differing = {key for key, _, _ in differences}
        # The fewest of the other keys that still tell each side's experiments apart.
        usable = keys_module.preference([key for key in keys if key not in differing], rules)
        suggested = keys_module.display_order(keys_module.choose(both.size, usable, [],
                                                                 values_of))
        raise Unmatched(f"BASE and NEW have no experiment in common ({described})",
                        suggested or [key for key in ("exp.model",) if values_of(key).any()])
    comparison.shown_codes = [values_of(key)[base_positions] for key in shown_keys]
    comparison.shown_tables = tables
    comparison.pairs = (base_positions, new_positions)
    _judge(comparison, both)
    if columns:
        for item in resolve(columns, both, np.arange(both.size), scaling=False):
            numbers = value_numbers(both, item.key)
            comparison.extra.append((item, numbers[base_positions], numbers[new_positions]))
    return comparison


def _latest(attempts: Attempts, filters: Sequence[Filter], rules: KeyRules) -> Attempts:
    """The newest attempt of each experiment that passes the filters, in order."""
    attempts = attempts.take(apply_filters(attempts, filters)) if filters else attempts
    selection = select(attempts, rules)
    return selection.attempts.take(selection.order[selection.starts[1:] - 1])


def _match_keys(sides: list[Attempts], rules: KeyRules,
                by: Sequence[str] | None) -> tuple[list[str], list[tuple[str, Any, Any]]]:
    """The keys experiments are matched on, and the constants that differ between sides."""
    identity = [keys_module.identity_keys(side, np.arange(side.size), rules) for side in sides]
    shared = [key for key in identity[0] if key in identity[1]]
    side_values = [keys_module.value_lists(side, np.arange(side.size)) for side in sides]
    varying = [set(keys_module.varying_keys(values, shared, side))
               for values, side in zip(side_values, sides)]
    differences = []
    for key in shared:
        if key in varying[0] or key in varying[1]:
            continue
        first = [column_of(side, key) for side in sides]
        codes = [int(column.codes[0]) for column in first]
        if first[0].texts()[codes[0]] != first[1].texts()[codes[1]]:
            differences.append((key, first[0].values[codes[0]], first[1].values[codes[1]]))
    if by is None:
        keys = [key for key in shared if key in varying[0] or key in varying[1]
                or any(key == d[0] for d in differences)]
        # The device model tells apart runs of one experiment on different GPUs of a side;
        # between sides, a new GPU is what a comparison may be about.
        keys = [key for key in keys if key != DEVICE_MODEL or key in varying[0] | varying[1]]
        return keys, differences
    wanted = [resolve_key(key, Attempts.concat(sides)) for key in by]
    for name, side, values in zip(("BASE", "NEW"), sides, side_values):
        loose = keys_module.undetermined(
            side.size, wanted, [k for k in shared if k not in wanted and k != DEVICE_MODEL],
            values)
        if loose:
            raise ResultsError(
                f"--by {','.join(by)}: in {name}, {', '.join(loose)} also vary, so one match "
                "would pair different experiments",
                hint="add them to --by, or keep one value with --filter KEY=VALUE")
    return wanted, [d for d in differences if d[0] not in wanted]


def _judge(comparison: Comparison, both: Attempts) -> None:
    """Values, changes, p-values and verdicts of every match."""
    base, new = comparison.pairs
    codes, names = statuses(both)
    ok = np.array([name == "ok" for name in names], dtype=bool)[codes]
    base_ok, new_ok = ok[base], ok[new]
    medians = numbers_of(both, VALUE_KEY)
    comparison.base_value = np.where(base_ok, medians[base], np.nan)
    comparison.new_value = np.where(new_ok, medians[new], np.nan)
    verdict = np.full(len(base), _CODE[SAME], dtype=np.intp)
    verdict[base_ok & ~new_ok] = _CODE[NOW_FAILS]
    verdict[~base_ok & new_ok] = _CODE[NOW_OK]
    verdict[~base_ok & ~new_ok] = _CODE[BOTH_FAIL]
    both_ok = base_ok & new_ok
    valued = both_ok & ~np.isnan(comparison.base_value) & ~np.isnan(comparison.new_value) & \
        (comparison.base_value > 0)
    verdict[both_ok & ~valued] = _CODE[NO_VALUE]
    with np.errstate(divide="ignore", invalid="ignore"):
        change = np.where(valued, comparison.new_value / comparison.base_value - 1.0, np.nan)
    comparison.change = change
    comparison.p_value = np.full(len(base), np.nan)
    beyond = np.flatnonzero(valued & (np.abs(change) > comparison.threshold))
    if len(beyond):
        _test(comparison, both, beyond, verdict)
    comparison.verdict = verdict


def _test(comparison: Comparison, both: Attempts, beyond: np.ndarray,
          verdict: np.ndarray) -> None:
    """The U test of the matches `beyond` the threshold (reading their per-batch times)."""
    base, new = comparison.pairs
    base_samples = both.samples(base[beyond])
    new_samples = both.samples(new[beyond])
    pending: dict[tuple[int, int], list[int]] = {}
    for position, (a, b) in enumerate(zip(base_samples, new_samples)):
        if a is None or b is None or len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
            verdict[beyond[position]] = _CODE[UNTESTED]
            continue
        pending.setdefault((len(a), len(b)), []).append(position)
    for group in pending.values():
        p_values = _mann_whitney(np.vstack([base_samples[i] for i in group]),
                                 np.vstack([new_samples[i] for i in group]))
        for position, p_value in zip(group, p_values.tolist()):
            match = beyond[position]
            comparison.p_value[match] = p_value
            if not p_value < comparison.alpha:
                verdict[match] = _CODE[NOT_SIGNIFICANT]
            else:
                verdict[match] = _CODE[SLOWER] if comparison.change[match] > 0 else _CODE[FASTER]


def _mann_whitney(base: np.ndarray, new: np.ndarray) -> np.ndarray:
    """SciPy's two-sided Mann-Whitney U test of each row pair (equal sample sizes)."""
    from scipy.stats import mannwhitneyu

    return np.atleast_1d(mannwhitneyu(base, new, axis=1, alternative="two-sided").pvalue)


def _optional(value: float) -> float | None:
    return None if value != value else float(value)


def parse_threshold(text: str) -> float:
    """`3%`, `3 %` or `0.03` as a fraction."""
    raw = text.strip()
    try:
        if raw.endswith("%"):
            return float(raw[:-1].strip()) / 100.0
        return float(raw)
    except ValueError:
        raise ResultsError(f"--threshold {text!r} is not a percentage",
                           hint="e.g. --threshold 3% (or 0.03)") from None
