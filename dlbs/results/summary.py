"""An attempt's summary: its scalar results, the engine's statistics, the monitor's summaries.

What reports read. Lists of numbers (per-batch times, monitor series) are left out: they
are what the summary is computed from, and a report of 100,000 experiments must not parse
them. Lists of text (warnings) stay. The engine's values (stats.py, usage.py, energy.py,
efficiency.py, bandwidth.py) win over keys of the same name the backend printed; LoadGen's scenario
results and anything else the backend printed are kept as printed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dlbs.results import bandwidth, efficiency, energy, stats, usage


def is_summary_value(value: Any) -> bool:
    """Scalars and lists of text belong in a summary; number series and objects do not."""
    if value is None or isinstance(value, str | int | float | bool):
        return True
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def summarize(params: Mapping[str, Any], results: Mapping[str, Any],
              started_at: str | None = None) -> dict[str, Any]:
    """The summary of one attempt's `results` (see the module); `params` gives the batch."""
    summary = {key: value for key, value in results.items() if is_summary_value(value)}
    summary.update(stats.summarize(params, results))
    summary.update(usage.summarize(results, started_at))
    throughput = summary.get("results.throughput")
    summary.update(energy.summarize(results, started_at, throughput))
    summary.update(efficiency.summarize(params, results, throughput))
    summary.update(bandwidth.summarize(params, results, summary.get("results.time")))
    return summary
