"""Model FLOPs utilisation and peak device memory, derived when an attempt is summarised.

The backend counts the FLOPs of one sample (`results.flops_per_sample`: FLOPs = 2 x
multiply-adds of the products and convolutions, forward + backward in training) and names
its GPU (`results.gpu_model`); the peak comes from `exp.peak_tflops` when it is above 0,
else from the table `configs/peaks/gpu_peak_tflops.yaml` by the GPU's name and the math the
dtype runs on (docs/efficiency.md).

Keys:
- `results.achieved_tflops`: `flops_per_sample x throughput / 1e12`, the whole experiment's;
- `results.peak_tflops`: one device's dense peak at the run's math, and `results.peak_source`
  (`exp.peak_tflops`, or the table's entry, math and source);
- `results.mfu` (a fraction): `achieved_tflops / (peak_tflops x exp.num_gpus)`;
- `results.mfu_unavailable`: why there is no MFU though there are FLOPs, and on every CPU
  row without `exp.peak_tflops` (the peak table is of GPUs);
- `results.gpu_mem_peak_mb` (MiB): the framework allocator's peak on one GPU, the
  `results.mem_peak` of a GPU run.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dlbs.config.loader import default_config_dir

#: The peak table, relative to the default configs' folder.
PEAK_TABLE = Path("peaks") / "gpu_peak_tflops.yaml"
#: The keys this module writes.
COMPUTED_KEYS = ("results.achieved_tflops", "results.peak_tflops", "results.peak_source",
                 "results.mfu", "results.mfu_unavailable", "results.gpu_mem_peak_mb")
#: Why a CPU run has no MFU.
CPU_REASON = ("a CPU run: dlbs's peak table holds GPUs only (configs/peaks/"
              "gpu_peak_tflops.yaml); set exp.peak_tflops to the CPU's peak TFLOPS for an MFU")
#: exp.dtype -> the math it runs on (float32 on tensor cores is TF32, exp.use_tensor_core).
_HALF = {"float16": "fp16", "bfloat16": "bf16"}


@functools.lru_cache(maxsize=8)
def gpu_table(path: str, field: str) -> tuple[tuple[str, re.Pattern[str], Any, str], ...]:
    """(name, pattern, value of `field`, source) of each GPU of the table at `path`."""
    from ruamel.yaml import YAML  # here: only GPU runs read the tables; it costs start-up

    document = YAML(typ="safe").load(Path(path).read_text())
    return tuple((str(entry["name"]), re.compile(entry["match"], re.IGNORECASE),
                  entry[field], str(entry["source"])) for entry in document["gpus"])


def peak_table(path: str) -> tuple[tuple[str, re.Pattern[str], dict[str, float], str], ...]:
    """(name, pattern, tflops by math, source) of each GPU of the table at `path`."""
    return tuple((name, pattern, {str(math_): float(value) for math_, value in tflops.items()},
                  source) for name, pattern, tflops, source in gpu_table(path, "tflops"))


def run_math(params: Mapping[str, Any]) -> str:
    """The math the experiment's dtype runs on: fp16, bf16, tf32 or fp32."""
    dtype = str(params.get("exp.dtype") or "float32")
    if dtype in _HALF:
        return _HALF[dtype]
    return "tf32" if params.get("exp.use_tensor_core", True) is not False else "fp32"


def table_peak(gpu_model: str, math_: str, path: Path | None = None
               ) -> tuple[float, str] | str:
    """(peak TFLOPS, its source) of `gpu_model` at `math_`, or why there is none.

    A GPU without TF32 (V100) does float32 on its CUDA cores: its fp32 figure stands in.
    """
    table = path or default_config_dir() / PEAK_TABLE
    try:
        entries = peak_table(str(table))
    except (OSError, KeyError, TypeError, ValueError, re.error) as error:
        return f"the peak table {table} cannot be read: {error}"
    for name, pattern, tflops, source in entries:
        if not pattern.search(gpu_model):
            continue
        chosen = math_ if math_ in tflops else "fp32" if math_ == "tf32" else None
        if chosen is None or chosen not in tflops:
            return f"{table.name} has no {math_} peak for {name}; set exp.peak_tflops"
        return tflops[chosen], f"{table.name}: {name}, {chosen} dense ({source})"
    return f"{gpu_model!r} is not in {table.name}; set exp.peak_tflops"


def summarize(params: Mapping[str, Any], results: Mapping[str, Any],
              throughput: Any) -> dict[str, Any]:
    """The derived keys of one attempt (see the module's table)."""
    summary: dict[str, Any] = {}
    memory = results.get("results.mem_peak")
    if params.get("exp.device_type") == "gpu" and _positive(memory):
        summary["results.gpu_mem_peak_mb"] = float(memory)
    flops = results.get("results.flops_per_sample")
    override = params.get("exp.peak_tflops")
    if params.get("exp.device_type") != "gpu" and not _positive(override) \
            and _positive(throughput):
        # CPUs have no peak table: their TFLOPS stand alone, and the row says why.
        summary["results.mfu_unavailable"] = CPU_REASON
    if not _positive(flops) or not _positive(throughput):
        return summary
    achieved = float(flops) * float(throughput) / 1e12
    summary["results.achieved_tflops"] = achieved
    if "results.mfu_unavailable" in summary:
        return summary
    gpu_model = results.get("results.gpu_model")
    if _positive(override):
        peak, source = float(override), "exp.peak_tflops"
    elif not isinstance(gpu_model, str) or not gpu_model:
        summary["results.mfu_unavailable"] = ("the backend did not name its GPU "
                                              "(results.gpu_model); set exp.peak_tflops")
        return summary
    else:
        found = table_peak(gpu_model, run_math(params))
        if isinstance(found, str):
            summary["results.mfu_unavailable"] = found
            return summary
        peak, source = found
    devices = params.get("exp.num_gpus")
    devices = devices if isinstance(devices, int) and devices > 0 else 1
    summary["results.peak_tflops"] = peak
    summary["results.peak_source"] = source
    summary["results.mfu"] = achieved / (peak * devices)
    return summary


def _positive(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)
