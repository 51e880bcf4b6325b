"""ResourceMonitor: samples a benchmark's process tree and GPUs in a background thread.

The series and their units are `dlbs.monitor.sampling`'s (the run loop stores each as
`results.use.<name>`); docs/monitor.md says how they are measured.
"""

from __future__ import annotations

from collections.abc import Sequence

from dlbs.monitor.gpu import QUERY_TIMEOUT
from dlbs.monitor.nvml import AUTO
from dlbs.monitor.rapl import POWERCAP
from dlbs.monitor.sampling import (
    GPU_SERIES,
    HOST_SERIES,
    MAX_GPU_FAILURES,
    ProcessTree,
    Sampler,
)

__all__ = ["GPU_SERIES", "HOST_SERIES", "MAX_GPU_FAILURES", "ResourceMonitor"]


class ResourceMonitor(Sampler):
    """Samples CPU, memory and GPUs of one process tree every `frequency` seconds.

    `gpus` are nvidia-smi indices (host numbering, as in `exp.gpus`; a string "0,1" is split
    at commas and colons), read through NVML (`nvml`: the pynvml module; "auto" imports it,
    None never uses it) or else the program `nvidia_smi`, with `query_timeout` the seconds
    one query may take; without GPUs, RAPL under `rapl_root` gives the CPU's energy. `log`
    is the benchmark's log, followed for the marks of its timed interval. Use: `start(pid)`
    after the benchmark started, `stop()` after it ended; `stop()` returns the series and
    `warnings` says what could not be measured.
    """

    def __init__(self, frequency: float, gpus: Sequence[str] | str = (),
                 nvidia_smi: str = "nvidia-smi", query_timeout: float = QUERY_TIMEOUT,
                 nvml: object = AUTO, rapl_root: str | None = POWERCAP,
                 log: str | None = None) -> None:
        super().__init__(frequency, gpus, nvidia_smi, query_timeout, nvml, rapl_root, log)

    def start(self, pid: int) -> None:
        """Start sampling the process tree rooted at `pid` in a background thread."""
        self.start_workload(ProcessTree(pid))
