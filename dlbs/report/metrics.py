"""The values a report can show: results keys, their titles with units, how cells combine them.

`--columns` names them with or without `results.` (`time_median`, `results.time_median`,
`use.gpu_util_mean`); `speedup` and `efficiency` exist in scaling reports, `speedup` also in
a regular report with a baseline (baseline.py). `throughput_median`, the throughput at
the median batch time (effective batch x 1000 / `results.time_median`), is computed from
stored values when a report shows it (`COMPUTED`); `data_wait`, the share of the timed
steps spent waiting for input data (0 to 1), is the backend's `results.data_wait`, or, for a
backend that prints only the mean wait, `results.time_data_wait` / `results.time`
(`FALLBACKS`). A cell shows the values of one run of one experiment (select.py): values of
different runs are never combined.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlbs.errors import ResultsError
from dlbs.report.identity import column_of, has_value_of, numbers_of
from dlbs.results.columns import Attempts

SPEEDUP, EFFICIENCY = "speedup", "efficiency"
SCALING_ONLY = (SPEEDUP, EFFICIENCY)


@dataclass(frozen=True)
class Metric:
    """One value column: the key it reads, its title (with the unit), its CSV/JSON field."""

    key: str
    title: str
    field: str


# key -> (title, field); the field of any other results.X is X.
_KNOWN: dict[str, tuple[str, str]] = {
    "results.time": ("batch time (ms)", "time_ms"),
    "results.throughput": ("throughput (inst/s)", "throughput"),
    "results.time_median": ("median batch time (ms)", "time_median"),
    "results.time_std": ("batch time std (ms, ddof=1)", "time_std"),
    "results.time_p90": ("p90 batch time (ms)", "time_p90"),
    "results.time_p95": ("p95 batch time (ms)", "time_p95"),
    "results.time_p99": ("p99 batch time (ms)", "time_p99"),
    "results.time_min": ("min batch time (ms)", "time_min"),
    "results.time_max": ("max batch time (ms)", "time_max"),
    "results.time_count": ("timed batches", "time_count"),
    "results.warmup_time": ("warm-up batch time (ms)", "warmup_time"),
    "results.time_data_wait": ("data wait (ms)", "time_data_wait"),
    "results.mem_peak": ("peak memory (MiB)", "mem_peak"),
    "results.use.cpu_mean": ("CPU mean (% of a core)", "use.cpu_mean"),
    "results.use.cpu_max": ("CPU max (% of a core)", "use.cpu_max"),
    "results.use.rss_mean": ("RSS mean (MiB)", "use.rss_mean"),
    "results.use.rss_max": ("RSS peak (MiB)", "use.rss_max"),
    "results.use.gpu_util_mean": ("GPU util mean (%)", "use.gpu_util_mean"),
    "results.use.gpu_util_max": ("GPU util max (%)", "use.gpu_util_max"),
    "results.use.gpu_mem_mean": ("GPU memory mean (MiB)", "use.gpu_mem_mean"),
    "results.use.gpu_mem_max": ("GPU memory peak (MiB)", "use.gpu_mem_max"),
    "results.use.gpu_power_mean": ("GPU power mean (W)", "use.gpu_power_mean"),
    "results.use.gpu_power_max": ("GPU power max (W)", "use.gpu_power_max"),
    "results.latency_mean": ("latency mean (ms)", "latency_mean"),
    "results.latency_p50": ("latency p50 (ms)", "latency_p50"),
    "results.latency_p90": ("latency p90 (ms)", "latency_p90"),
    "results.latency_p95": ("latency p95 (ms)", "latency_p95"),
    "results.latency_p99": ("latency p99 (ms)", "latency_p99"),
    "results.latency_p999": ("latency p99.9 (ms)", "latency_p999"),
    "results.qps": ("QPS (samples/s)", "qps"),
    "results.target_qps": ("target QPS (samples/s)", "target_qps"),
    "results.max_qps": ("max QPS (samples/s)", "max_qps"),
    "results.latency_bound_met": ("bound met", "latency_bound_met"),
    "results.loadgen_valid": ("LoadGen valid", "loadgen_valid"),
    "results.top1": ("top-1", "top1"),
    "results.top5": ("top-5", "top5"),
    "results.num_samples": ("samples", "num_samples"),
    # LLM generation (docs/llm-serving.md): token latencies, tokens per second, bandwidth.
    "results.ttft_mean": ("TTFT mean (ms)", "ttft_mean"),
    "results.ttft_p50": ("TTFT p50 (ms)", "ttft_p50"),
    "results.ttft_p90": ("TTFT p90 (ms)", "ttft_p90"),
    "results.ttft_p99": ("TTFT p99 (ms)", "ttft_p99"),
    "results.tpot_mean": ("TPOT mean (ms)", "tpot_mean"),
    "results.tpot_p50": ("TPOT p50 (ms)", "tpot_p50"),
    "results.tpot_p90": ("TPOT p90 (ms)", "tpot_p90"),
    "results.tpot_p99": ("TPOT p99 (ms)", "tpot_p99"),
    "results.prefill_tokens_per_second": ("prefill tokens/s", "prefill_tokens_per_second"),
    "results.decode_tokens_per_second": ("decode tokens/s", "decode_tokens_per_second"),
    "results.decode_bandwidth_fraction": ("decode bandwidth (of the peak)",
                                          "decode_bandwidth_fraction"),
    SPEEDUP: ("speedup", SPEEDUP),
    EFFICIENCY: ("efficiency (%)", EFFICIENCY),
    "throughput_median": ("throughput at the median (inst/s)", "throughput_median"),
    "results.data_wait": ("data wait (share of the step time)", "data_wait"),
    # Efficiency (docs/efficiency.md): energy of the timed interval, FLOPs, MFU, memory.
    "results.energy_per_sample_j": ("energy per sample (J)", "energy_per_sample_j"),
    "results.samples_per_joule": ("samples per joule", "samples_per_joule"),
    "results.power_avg_w": ("average power (W)", "power_avg_w"),
    "results.energy_j": ("energy (J)", "energy_j"),
    "results.energy_interval_s": ("energy interval (s)", "energy_interval_s"),
    "results.energy_source": ("energy source", "energy_source"),
    "results.flops_per_sample": ("FLOPs per sample", "flops_per_sample"),
    "results.achieved_tflops": ("achieved TFLOPS", "achieved_tflops"),
    "results.peak_tflops": ("peak TFLOPS (one device, dense)", "peak_tflops"),
    "results.mfu": ("MFU (of the dense peak)", "mfu"),
    # Transformers (docs/transformers.md): throughput in tokens, FLOPs by the formula.
    "results.tokens_per_second": ("tokens/s", "tokens_per_second"),
    "results.tokens_per_second_per_gpu": ("tokens/s per GPU", "tokens_per_second_per_gpu"),
    "results.flops_per_token": ("FLOPs per token", "flops_per_token"),
    "results.gpu_mem_peak_mb": ("GPU peak memory, allocator (MiB)", "gpu_mem_peak_mb"),
}
# The monitor's summaries that answer "was the GPU busy?" next to the speed.
MONITOR_COLUMNS = ("results.use.gpu_util_mean", "results.use.gpu_mem_max",
                   "results.use.gpu_power_mean", "results.use.cpu_mean")
# What the efficiency report shows (and a regular report adds where its experiments have
# them: energy per sample and MFU beside the throughput).
EFFICIENCY_COLUMNS = ("results.throughput", "results.energy_per_sample_j",
                      "results.samples_per_joule", "results.power_avg_w",
                      "results.achieved_tflops", "results.mfu", "results.gpu_mem_peak_mb")
REGULAR_EXTRAS = ("results.tokens_per_second", "results.tokens_per_second_per_gpu",
                  "results.energy_per_sample_j", "results.mfu")
TIME = "results.time"
THROUGHPUT = "results.throughput"


def metric(key: str) -> Metric:
    """The metric that reads `key` (a full key: results.X, speedup, efficiency, ...)."""
    title, field = _KNOWN.get(key, (key.removeprefix("results."), key.removeprefix("results.")))
    return Metric(key, title, field)


def resolve(names: Sequence[str], attempts: Attempts, rows: np.ndarray,
            scaling: bool, baseline: bool = False) -> list[Metric]:
    """Metrics for `--columns` names (`x` or `results.x`); unknown names are one error.

    A name that is not a known value must have a value in one of the attempts `rows`.
    `speedup` needs a scaling report or a `baseline`; `efficiency` a scaling report.
    """
    metrics = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if name in SCALING_ONLY:
            if not scaling and not (baseline and name == SPEEDUP):
                raise ResultsError(
                    f"--columns {name}: only weak and strong reports have it"
                    + (", or a regular report with --baseline KEY=GLOB" if name == SPEEDUP
                       else ""))
            metrics.append(metric(name))
            continue
        if name.removeprefix("results.") in COMPUTED:
            metrics.append(metric(name.removeprefix("results.")))
            continue
        key = name if name.startswith(("results.", "exp.", "env.")) else f"results.{name}"
        if key not in _KNOWN and not has_value_of(attempts, key)[rows].any():
            raise ResultsError(
                f"--columns {raw}: no experiment has {key}",
                hint="`dlbs parse LOGS` lists every key; monitor summaries are "
                     "use.<series>_mean and use.<series>_max (docs/reports.md)")
        metrics.append(metric(key))
    if not metrics:
        raise ResultsError("--columns names no column", hint="e.g. --columns time,throughput")
    return metrics


@dataclass
class CellValues:
    """One value in each cell: `numbers` (NaN: none), `others` (cell -> its value as stored).

    `others` holds what is not a float: text, booleans, lists, and integers (a sample count:
    `numbers` has it too, as a float), which machine formats write as stored.
    """

    numbers: np.ndarray
    others: dict[int, Any] = field(default_factory=dict)

    def get(self, cell: int) -> Any:
        """The value of one cell: a float, another value, or None."""
        number = self.numbers[cell]
        if number == number:   # not NaN
            return float(number)
        return self.others.get(cell)

    def stored(self, cells: np.ndarray) -> list[Any]:
        """The values of `cells` as stored: floats, integers, others, None for none."""
        numbers = self.numbers[cells]
        found: list[Any] = [None if number != number else number
                            for number in numbers.tolist()]
        if self.others:
            for position, cell in enumerate(cells.tolist()):
                if cell in self.others:
                    found[position] = self.others[cell]
        return found


def _throughput_median(attempts: Attempts) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return numbers_of(attempts, "exp.effective_batch") * 1000.0 / numbers_of(
            attempts, "results.time_median")


def _data_wait(attempts: Attempts) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return numbers_of(attempts, "results.time_data_wait") / numbers_of(attempts, TIME)


# Values computed from stored ones (see the module): key -> per attempt, NaN where none.
COMPUTED = {"throughput_median": _throughput_median}
# Stored values computed from others where a backend did not print them.
FALLBACKS = {"results.data_wait": _data_wait}


def value_numbers(attempts: Attempts, key: str) -> np.ndarray:
    """A value's finite numbers over `attempts` (NaN elsewhere), computed ones included."""
    computed = COMPUTED.get(key)
    if computed is not None:
        found = computed(attempts)
        return np.where(np.isfinite(found), found, np.nan)
    stored = numbers_of(attempts, key)
    fallback = FALLBACKS.get(key)
    if fallback is not None and np.isnan(stored).any():
        found = fallback(attempts)
        stored = np.where(np.isnan(stored) & np.isfinite(found), found, stored)
    return stored


def has_values(attempts: Attempts, key: str) -> np.ndarray:
    """Where a value (computed ones included) is not None."""
    if key in COMPUTED:
        return ~np.isnan(value_numbers(attempts, key))
    found = has_value_of(attempts, key)
    if key in FALLBACKS:
        found = found | ~np.isnan(value_numbers(attempts, key))
    return found


def cell_values(attempts: Attempts, shown: np.ndarray, metric_: Metric) -> CellValues:
    """Each cell's value of `metric_`: that of its attempt `shown[cell]`.

    Numbers come back as floats (NaN and infinities count as missing); other values (text,
    booleans, lists) as they are.
    """
    key = metric_.key
    numbers = value_numbers(attempts, key)[shown]
    values = CellValues(numbers)
    if key in COMPUTED:
        return values
    missing = np.flatnonzero(np.isnan(numbers) & has_value_of(attempts, key)[shown])
    with np.errstate(invalid="ignore"):
        whole = np.flatnonzero(numbers == np.floor(numbers))
    if len(missing) or len(whole):
        column = column_of(attempts, key)
        codes = column.codes[shown]
        decoded = column.values
        for cell in missing.tolist():
            value = decoded[codes[cell]]
            if not isinstance(value, int | float) or isinstance(value, bool):
                values.others[cell] = value
        for cell in whole.tolist():
            value = decoded[codes[cell]]
            if type(value) is int:
                values.others[cell] = value
    return values
