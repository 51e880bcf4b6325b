"""The energy of an experiment's timed interval, from the monitor's counters or its power.

The monitor (docs/monitor.md) stores counters as series: `results.use.gpu_energy` (the
experiment's GPUs, summed; NVML's energy counter), `results.use.gpu<i>_energy` (each GPU,
when there are several) and `results.use.cpu_energy` (the CPU packages, RAPL, for runs
without GPUs), joules since its first reading, one value per sample, plus `gpu_power` (W).
It samples as soon as the backend marks each end of its timed interval, so a reading lies
within a few tens of milliseconds after each mark. A job of several nodes has each node's
series in `results.use.nodes`, each on the attempt's clock.

Keys (docs/efficiency.md says what each includes):
- `results.energy_j` (J): the counters at the interval's end minus at its start, each read
  linearly between the two samples around the moment, summed over GPUs and nodes; each
  GPU's as `results.energy_j.gpu<i>` (`results.energy_j.<node>[.gpu<i>]` with several nodes);
- `results.energy_interval_s` (s), `results.power_avg_w` (W: energy over interval);
- `results.energy_per_sample_j` (J) over the samples processed (throughput x interval) and
  `results.samples_per_joule`, its inverse;
- `results.energy_source`: `nvml counter`, `rapl counter`, or `power integral` (no counter:
  the trapezoidal integral of `gpu_power`, an end holding the nearest sample for up to one
  sampling period);
- `results.energy_warnings`: why a number may be off (the interval placed without the
  backend's marks, a counter that disagrees with the power integral by more than 10 %);
- `results.energy_unavailable`: why there are none of these (with a monitor, which reads the
  counters at the marks by default; without one there are no energy keys at all).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dlbs.results import usage

NVML = "nvml counter"
RAPL = "rapl counter"
POWER_INTEGRAL = "power integral"
#: How far outside its samples a counter is still read (on the line through the nearest
#: two): the monitor samples within a poll (20 ms) after it sees a mark, and the attempt's
#: clock and the monitor's start a few milliseconds apart, so the start mark of a backend
#: that marks before the monitor's first regular sample lies just before its first sample.
REACH_S = 0.1
#: Counter and power integral further apart than this (relative) get a warning.
DISAGREEMENT = 0.10
#: The monitor's text saying why it has no counter (dlbs.monitor.sampling.ENERGY_UNAVAILABLE).
MONITOR_REASON = "energy_unavailable"
#: Where the monitor's counters went back (dlbs.monitor.sampling.ENERGY_GAPS).
GAPS = "energy_gaps"
#: The keys this module writes (and `results.energy_j.<node>[.gpu<i>]`, `.gpu<i>`).
COMPUTED_KEYS = ("results.energy_j", "results.energy_interval_s", "results.power_avg_w",
                 "results.energy_per_sample_j", "results.samples_per_joule",
                 "results.energy_source", "results.energy_warnings",
                 "results.energy_unavailable")


def counter_at(times: Sequence[Any], values: Sequence[Any], moment: float,
               reach: float = REACH_S) -> float | None:
    """A counter's value at `moment`, linear between the finite samples around it, or None.

    A moment up to `reach` seconds before the first sample or after the last is read on the
    line through the two nearest samples (see REACH_S); farther out, None.
    """
    points = _finite_points(times, values)
    if not points or not points[0][0] - reach <= moment <= points[-1][0] + reach:
        return None
    clock = [t for t, _ in points]
    right = min(max(bisect.bisect_left(clock, moment), 1), len(points) - 1)
    if clock[right] == moment or len(points) == 1:
        return points[right][1] if clock[right] == moment else None
    (t0, v0), (t1, v1) = points[right - 1], points[right]
    return v0 + (v1 - v0) * (moment - t0) / (t1 - t0)


def counter_energy(times: Sequence[Any], values: Sequence[Any], start: float,
                   end: float) -> float | None:
    """The counter's increase from `start` to `end`; None if not covered or it went back."""
    first, last = counter_at(times, values, start), counter_at(times, values, end)
    if first is None or last is None or last < first:
        return None
    return last - first


def power_energy(times: Sequence[Any], power: Sequence[Any], start: float, end: float,
                 hold: float) -> float | None:
    """The trapezoidal integral of `power` from `start` to `end`, joules, or None.

    Power is linear between samples; an end may lie up to `hold` seconds beyond the first or
    last sample, which then holds its value there.
    """
    points = _finite_points(times, power)
    if not points or start < points[0][0] - hold or end > points[-1][0] + hold:
        return None
    clock = np.asarray([t for t, _ in points])
    watts = np.asarray([p for _, p in points])
    inner = clock[(clock > start) & (clock < end)]
    moments = np.concatenate(([start], inner, [end]))
    levels = np.interp(moments, clock, watts)
    return float(np.sum((levels[1:] + levels[:-1]) / 2.0 * np.diff(moments)))


def gap_inside(gaps: Any, times: Sequence[Any], start: float, end: float) -> str | None:
    """Why the counters are unusable from `start` to `end`: a gap of theirs inside, or None.

    `gaps` is the monitor's list (ENERGY_GAPS): a gap at sample i is the step from sample
    i-1 to sample i, over which a counter went back (a reset, a driver reloaded).
    """
    if not isinstance(gaps, list):
        return None
    for gap in gaps:
        index = gap.get("sample") if isinstance(gap, Mapping) else None
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            continue
        after = _time_of(times, index - 1, -math.inf)
        at = _time_of(times, index, math.inf)
        if at > start and after < end:
            counter = str(gap.get("counter") or "energy counter")[:200]
            what = str(gap.get("what") or "went back")[:200]
            return (f"the {counter} {what} between {after:.6g} s and {at:.6g} s, inside the "
                    f"timed interval ({start:.6g} to {end:.6g} s): its energy is unknown")
    return None


def _time_of(times: Sequence[Any], index: int, default: float) -> float:
    if 0 <= index < len(times) and _finite(times[index]):
        return float(times[index])
    return default


def sampling_period(times: Sequence[Any]) -> float:
    """The median time between samples (0 with fewer than two)."""
    clock = [t for t in times if isinstance(t, int | float) and math.isfinite(t)]
    if len(clock) < 2:
        return 0.0
    return float(np.median(np.diff(np.asarray(clock, dtype=np.float64))))


def _finite_points(times: Sequence[Any], values: Sequence[Any]) -> list[tuple[float, float]]:
    return [(float(t), float(v)) for t, v in zip(times, values)
            if _finite(t) and _finite(v)]


def _readings_seen(times: Sequence[Any], values: Sequence[Any]) -> str:
    """What a counter's readings were, for the reason it could not be read.

    A run whose energy is missing then says why from its own row: how many readings, which
    were numbers, when.
    """
    points = _finite_points(times, values)
    listed = ", ".join(f"{t:.6g}" for t, _ in points[:4]) + (" ..." if len(points) > 4 else "")
    where = f" at {listed} s" if points else ""
    return f"{len(points)} of its {len(values)} readings are numbers{where}"


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class _Node:
    """One node's energy over the interval, its source, each GPU's, or why there is none."""

    def __init__(self, series: Mapping[str, Any], start: float, end: float) -> None:
        self.joules: float | None = None
        self.source = ""
        self.per_gpu: dict[str, float] = {}
        self.reason: str | None = None
        self.warnings: list[str] = []
        times = series.get("time")
        if not isinstance(times, list) or not times:
            reason = series.get(MONITOR_REASON)
            self.reason = reason if isinstance(reason, str) and reason else \
                "the monitor took no sample"
            return
        power = series.get("gpu_power")
        integral = None
        if isinstance(power, list):
            integral = power_energy(times, power, start, end, sampling_period(times))
        for name, source in (("gpu_energy", NVML), ("cpu_energy", RAPL)):
            counter = series.get(name)
            if not isinstance(counter, list):
                continue
            gap = gap_inside(series.get(GAPS), times, start, end)
            if gap is not None:
                self.reason = gap
                return
            first, last = counter_at(times, counter, start), counter_at(times, counter, end)
            if first is None or last is None:
                self.warnings.append(f"the {source} has no readings around both ends of the "
                                     f"timed interval ({_readings_seen(times, counter)}; the "
                                     f"interval {start:.6g} to {end:.6g} s)")
                break
            if last < first:
                self.reason = (f"the {source} went back over the timed interval ({first:.6g} "
                               f"J, then {last:.6g} J): the interval is unusable")
                return
            self.joules = last - first
            self.source = source
            self.per_gpu = self._gpus(series, times, start, end)
            if integral and abs(self.joules - integral) > DISAGREEMENT * integral:
                self.warnings.append(
                    f"the {source} gives {self.joules:.6g} J, the integral of the sampled "
                    f"power {integral:.6g} J")
            return
        if integral is not None:
            self.joules, self.source = integral, POWER_INTEGRAL
            return
        reason = series.get(MONITOR_REASON)
        if self.warnings:
            self.reason = self.warnings.pop()
        elif isinstance(power, list):
            self.reason = "the power samples do not cover the timed interval"
        else:
            self.reason = reason if isinstance(reason, str) else "no energy or power series"

    @staticmethod
    def _gpus(series: Mapping[str, Any], times: list, start: float,
              end: float) -> dict[str, float]:
        found = {}
        for key, values in series.items():
            if key.startswith("gpu") and key.endswith("_energy") and key != "gpu_energy" \
                    and isinstance(values, list):
                joules = counter_energy(times, values, start, end)
                if joules is not None:
                    found[key[len("gpu"):-len("_energy")]] = joules
        return found


def summarize(results: Mapping[str, Any], started_at: str | None,
              throughput: Any) -> dict[str, Any]:
    """The energy keys of one attempt (see the module's table); {} without a monitor."""
    if not isinstance(results.get(usage.TIME_SERIES), list):
        # No sample (none kept): the monitor may still have said why it had no counter.
        reason = results.get(usage.PREFIX + MONITOR_REASON)
        return {"results.energy_unavailable": reason} if isinstance(reason, str) and reason \
            else {}
    interval = usage.timed_interval(results, started_at)
    if interval is None:
        return {"results.energy_unavailable": "the timed interval cannot be placed on the "
                                              "monitor's clock (no marks, end time or "
                                              "batch times)"}
    start, end = interval
    warnings = []
    if usage.marked_interval(results, started_at) is None:
        warnings.append("the backend marked no timed interval: it is placed from its end "
                        "time and batch times")
    nodes = results.get(f"{usage.PREFIX}nodes")
    if isinstance(nodes, dict) and nodes:
        measured = {str(name): _Node(series, start, end) for name, series in sorted(nodes.items())
                    if isinstance(series, dict)}
    else:
        own = {key[len(usage.PREFIX):]: value for key, value in results.items()
               if key.startswith(usage.PREFIX)}
        measured = {"": _Node(own, start, end)}
    several = len(measured) > 1
    summary: dict[str, Any] = {}
    for name, node in measured.items():
        prefix = f"{name}: " if several else ""
        warnings += [prefix + text for text in node.warnings]
        if node.joules is None:
            return {"results.energy_unavailable": prefix + str(node.reason),
                    **({"results.energy_warnings": warnings} if warnings else {})}
        where = f"results.energy_j.{name}" if several else "results.energy_j"
        if several:
            summary[where] = node.joules
        for gpu, joules in node.per_gpu.items():
            summary[f"{where}.gpu{gpu}"] = joules
    total = math.fsum(node.joules for node in measured.values())  # type: ignore[misc]
    seconds = end - start
    summary["results.energy_j"] = total
    summary["results.energy_interval_s"] = seconds
    summary["results.energy_source"] = ", ".join(sorted({n.source for n in measured.values()}))
    if seconds > 0:
        summary["results.power_avg_w"] = total / seconds
        if _finite(throughput) and throughput > 0 and total > 0:
            per_sample = total / (throughput * seconds)
            summary["results.energy_per_sample_j"] = per_sample
            summary["results.samples_per_joule"] = 1.0 / per_sample
    if warnings:
        summary["results.energy_warnings"] = warnings
    return summary
