"""A decoder's decode bandwidth, and its share of the GPU's memory bandwidth.

A decoder's benchmark (docs/llm-serving.md) prints the bytes its decode step must read
(`results.decode_bytes_per_step`); with the mean step time (`results.time`, ms, dlbs's
statistics) and one device's memory bandwidth, from `exp.peak_memory_bandwidth` when above 0,
else from the table `configs/peaks/gpu_memory_bandwidth.yaml` by the GPU's name
(`results.gpu_model`; docs/efficiency.md):

- `results.decode_bandwidth` (TB/s): bytes per step over the time per step;
- `results.peak_bandwidth` (TB/s, one device) and `results.bandwidth_source`;
- `results.decode_bandwidth_fraction`: `decode_bandwidth / peak_bandwidth`;
- `results.bandwidth_unavailable`: why there is no fraction though there are bytes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dlbs.config.loader import default_config_dir
from dlbs.results.efficiency import gpu_table

#: The bandwidth table, relative to the default configs' folder.
BANDWIDTH_TABLE = Path("peaks") / "gpu_memory_bandwidth.yaml"
#: The keys this module writes.
COMPUTED_KEYS = ("results.decode_bandwidth", "results.peak_bandwidth",
                 "results.bandwidth_source", "results.decode_bandwidth_fraction",
                 "results.bandwidth_unavailable")


def table_bandwidth(gpu_model: str, path: Path | None = None) -> tuple[float, str] | str:
    """(memory bandwidth TB/s, its source) of `gpu_model`, or why there is none."""
    table = path or default_config_dir() / BANDWIDTH_TABLE
    try:
        entries = gpu_table(str(table), "tbps")
    except (OSError, KeyError, TypeError, ValueError, re.error) as error:
        return f"the bandwidth table {table} cannot be read: {error}"
    for name, pattern, tbps, source in entries:
        if pattern.search(gpu_model):
            return float(tbps), f"{table.name}: {name} ({source})"
    return f"{gpu_model!r} is not in {table.name}; set exp.peak_memory_bandwidth"


def summarize(params: Mapping[str, Any], results: Mapping[str, Any],
                      step_ms: Any) -> dict[str, Any]:
    """The keys of one attempt (the module's list); `step_ms` is its mean step time."""
    read = results.get("results.decode_bytes_per_step")
    if not _positive(read) or not _positive(step_ms):
        return {}
    achieved = float(read) / (float(step_ms) / 1000.0) / 1e12
    summary: dict[str, Any] = {"results.decode_bandwidth": achieved}
    override = params.get("exp.peak_memory_bandwidth")
    gpu_model = results.get("results.gpu_model")
    if _positive(override):
        peak, source = float(override), "exp.peak_memory_bandwidth"
    elif params.get("exp.device_type") != "gpu":
        return summary  # CPUs have no table: their bandwidth stands alone
    elif not isinstance(gpu_model, str) or not gpu_model:
        summary["results.bandwidth_unavailable"] = ("the backend did not name its GPU "
                                                    "(results.gpu_model); set "
                                                    "exp.peak_memory_bandwidth")
        return summary
    else:
        found = table_bandwidth(gpu_model)
        if isinstance(found, str):
            summary["results.bandwidth_unavailable"] = found
            return summary
        peak, source = found
    summary["results.peak_bandwidth"] = peak
    summary["results.bandwidth_source"] = source
    summary["results.decode_bandwidth_fraction"] = achieved / peak
    return summary


def _positive(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)
