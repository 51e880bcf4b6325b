"""Resource monitor: CPU, memory and GPU series of a benchmark's process tree.

`ResourceMonitor(frequency, gpus).start(pid)` ... `.stop()` -> series; see `monitor.py` for
the series and their units and docs/monitor.md for how they are measured.
"""

from dlbs.monitor.monitor import GPU_SERIES, HOST_SERIES, ResourceMonitor

__all__ = ["GPU_SERIES", "HOST_SERIES", "ResourceMonitor"]
