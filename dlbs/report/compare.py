"""Two sets of results side by side: what got slower, what got faster, what now fails.

Experiments are matched on the identity parameters both sides have (identity.py), not on
`exp.id`, which changes when a new version of dlbs adds a parameter; the device model joins
the match when it varies within a side. The newest attempt of each experiment counts.

Per match: the median batch time of both sides, the relative change, and whether the
per-batch times differ significantly by SciPy's Mann-Whitney U test (two-sided). As in asv,
a change within the threshold is "same" whatever the test says (a real but tiny difference
is not a regression), and one beyond it counts only when the test says it is significant at
`alpha`: noise is never reported as a change. An ok experiment that now fails is a
regression too.
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
from dlbs.report.identity import DEVICE_MODEL, KeyRules, key_rules, value_of
from dlbs.report.select import Filter, apply_filters, as_text, group_experiments, resolve_key
from dlbs.results.sources import Record

VALUE_KEY = "results.time_median"
DEFAULT_THRESHOLD = 0.03
DEFAULT_ALPHA = 0.01
# Fewer per-batch times than this on a side: too few for the test to mean anything.
MIN_SAMPLES = 5

SLOWER, FASTER, SAME = "slower", "faster", "same"
NOT_SIGNIFICANT, UNTESTED = "not significant", "untested"
NOW_FAILS, NOW_OK, BOTH_FAIL, NO_VALUE = "now fails", "now ok", "both fail", "no value"
REGRESSIONS = (SLOWER, NOW_FAILS)


@dataclass
class Match:
    """One experiment on both sides."""

    shown: tuple[Any, ...]
    base: Record
    new: Record
    base_value: float | None = None
    new_value: float | None = None
    change: float | None = None       # new / base - 1 of the median batch time
    p_value: float | None = None
    verdict: str = SAME


@dataclass
class Comparison:
    """Matches, experiments on one side only, and the settings that judged them."""

    keys: list[str]
    matches: list[Match] = field(default_factory=list)
    base_only: list[tuple[Any, ...]] = field(default_factory=list)
    new_only: list[tuple[Any, ...]] = field(default_factory=list)
    threshold: float = DEFAULT_THRESHOLD
    alpha: float = DEFAULT_ALPHA
    # Constant parameters (and device models) that differ between the sides: (key, base, new).
    differences: list[tuple[str, Any, Any]] = field(default_factory=list)

    @property
    def regressions(self) -> list[Match]:
        """Matches that got significantly slower than the threshold, or now fail."""
        return [match for match in self.matches if match.verdict in REGRESSIONS]

    def counts(self) -> Counter[str]:
        """Matches per verdict."""
        return Counter(match.verdict for match in self.matches)


def compare(base: Sequence[Record], new: Sequence[Record], *, by: Sequence[str] | None = None,
            filters: Sequence[Filter] = (), threshold: float = DEFAULT_THRESHOLD,
            alpha: float = DEFAULT_ALPHA) -> Comparison:
    """Match `base` and `new` (attempt records with samples) and judge every match."""
    if not (0 <= threshold < 10) or not math.isfinite(threshold):
        raise ResultsError(f"threshold {threshold!r} must be a fraction >= 0 (3% is 0.03)")
    if not 0 < alpha < 1:
        raise ResultsError(f"alpha {alpha!r} must be between 0 and 1")
    rules = key_rules()
    sides = [_latest(apply_filters(records, filters), rules) for records in (base, new)]
    for name, side in zip(("BASE", "NEW"), sides):
        if not side:
            raise ResultsError(f"{name} holds no experiments" + (" that match the filters"
                                                                 if filters else ""))
    both = sides[0] + sides[1]
    values_of = keys_module.value_lists(both)
    keys, differences = _match_keys(sides, rules, by, values_of)
    comparison = Comparison(keys=[], threshold=threshold, alpha=alpha, differences=differences)
    match_keys = list(zip(*(values_of(name) for name in keys))) if keys else [()] * len(both)
    split = len(sides[0])
    tables: list[dict[tuple[Any, ...], int]] = [{}, {}]
    for side, (start, stop) in enumerate(((0, split), (split, len(both)))):
        for position in range(start, stop):
            key = match_keys[position]
            if key in tables[side]:
                raise ResultsError(
                    f"{('BASE', 'NEW')[side]} has two experiments that the match keys "
                    f"({', '.join(keys) or 'none'}) cannot tell apart",
                    hint="match on more keys with --by, or keep one with --filter")
            tables[side][key] = position
    lead = ["exp.model"] if any(v is not None for v in values_of("exp.model")) else []
    shown_keys = keys_module.display_order(keys_module.choose(
        len(both), keys_module.preference([k for k in keys if k not in lead], rules), lead,
        values_of))
    comparison.keys = shown_keys

    def shown(position: int) -> tuple[Any, ...]:
        return tuple(value_of(both[position], name) for name in shown_keys)

    for key, position in tables[0].items():
        other = tables[1].get(key)
        if other is None:
            comparison.base_only.append(shown(position))
        else:
            comparison.matches.append(Match(shown(position), both[position], both[other]))
    comparison.new_only = [shown(p) for k, p in tables[1].items() if k not in tables[0]]
    if not comparison.matches:
        described = "; ".join(f"{key}: {as_text(a)!r} vs {as_text(b)!r}"
                              for key, a, b in differences) or "every experiment differs"
        raise ResultsError(f"BASE and NEW have no experiment in common ({described})",
                           hint="match on fewer parameters with --by KEY,KEY")
    _judge(comparison)
    return comparison


def _latest(records: Sequence[Record], rules: KeyRules) -> list[Record]:
    return [experiment.latest for experiment in group_experiments(records, rules)]


def _match_keys(sides: list[list[Record]], rules: KeyRules, by: Sequence[str] | None,
                values_of: keys_module.ValuesOf) -> tuple[list[str], list[tuple[str, Any, Any]]]:
    """The keys experiments are matched on, and the constants that differ between sides."""
    identity = [keys_module.identity_keys(side, rules) for side in sides]
    shared = [key for key in identity[0] if key in identity[1]]
    varying = [set(keys_module.varying_keys(side, shared)) for side in sides]
    differences = []
    for key in shared:
        if key in varying[0] or key in varying[1]:
            continue
        a, b = value_of(sides[0][0], key), value_of(sides[1][0], key)
        if a != b:
            differences.append((key, a, b))
    if by is None:
        keys = [key for key in shared if key in varying[0] or key in varying[1]
                or any(key == d[0] for d in differences)]
        # The device model tells apart runs of one experiment on different GPUs of a side;
        # between sides, a new GPU is what a comparison may be about.
        keys = [key for key in keys if key != DEVICE_MODEL or key in varying[0] | varying[1]]
        return keys, differences
    everything = sides[0] + sides[1]
    wanted = [resolve_key(key, everything) for key in by]
    for name, side in zip(("BASE", "NEW"), sides):
        side_values = keys_module.value_lists(side)
        loose = keys_module.undetermined(
            len(side), wanted, [k for k in shared if k not in wanted and k != DEVICE_MODEL],
            side_values)
        if loose:
            raise ResultsError(
                f"--by {','.join(by)}: in {name}, {', '.join(loose)} also vary, so one match "
                "would pair different experiments",
                hint="add them to --by, or keep one value with --filter KEY=VALUE")
    return wanted, [d for d in differences if d[0] not in wanted]


def _judge(comparison: Comparison) -> None:
    """Values, changes, p-values and verdicts of every match."""
    pending: dict[tuple[int, int], list[Match]] = {}
    for match in comparison.matches:
        base, new = match.base.experiment, match.new.experiment
        base_ok = base.get("results.status") == "ok"
        new_ok = new.get("results.status") == "ok"
        match.base_value = _number(base.get(VALUE_KEY)) if base_ok else None
        match.new_value = _number(new.get(VALUE_KEY)) if new_ok else None
        if not base_ok or not new_ok:
            match.verdict = NOW_FAILS if base_ok else NOW_OK if new_ok else BOTH_FAIL
            continue
        if match.base_value is None or match.new_value is None or match.base_value <= 0:
            match.verdict = NO_VALUE
            continue
        match.change = match.new_value / match.base_value - 1.0
        if abs(match.change) <= comparison.threshold:
            match.verdict = SAME
            continue
        a, b = match.base.samples, match.new.samples
        if a is None or b is None or len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
            match.verdict = UNTESTED
            continue
        pending.setdefault((len(a), len(b)), []).append(match)
    for group in pending.values():
        _mann_whitney(group, comparison.alpha)


def _mann_whitney(group: list[Match], alpha: float) -> None:
    """SciPy's two-sided Mann-Whitney U test, vectorised over matches of equal sample sizes."""
    from scipy.stats import mannwhitneyu

    base = np.vstack([match.base.samples for match in group])
    new = np.vstack([match.new.samples for match in group])
    p_values = np.atleast_1d(mannwhitneyu(base, new, axis=1, alternative="two-sided").pvalue)
    for match, p_value in zip(group, p_values):
        match.p_value = float(p_value)
        if not match.p_value < alpha:
            match.verdict = NOT_SIGNIFICANT
        else:
            match.verdict = SLOWER if (match.change or 0.0) > 0 else FASTER


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


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

