"""ResourceMonitor: samples a benchmark's process tree and GPUs in a background thread.

Series (the run loop stores each as `results.use.<name>`), one value per sample, aligned:

| name | unit | what |
|---|---|---|
| `time` | s | when the sample was taken, seconds after `start()` |
| `cpu` | % of one core | CPU time the tree used since the last sample, summed over processes |
| `rss` | MiB | resident memory, summed over the tree's processes |
| `gpu_util` | % | mean utilization of the selected GPUs |
| `gpu_mem` | MiB | memory used on the selected GPUs, summed (the GPUs' totals, all processes) |
| `gpu_power` | W | power draw of the selected GPUs, summed |

GPU series exist only when GPUs were named and nvidia-smi answered at least once; a sample
whose query failed holds NaN there (or where a GPU reported `[N/A]`), so every series keeps
the length of `time`. Nothing here raises into the run: problems go to `warnings`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence

from dlbs.monitor import proc
from dlbs.monitor.gpu import (
    QUERY_TIMEOUT,
    GpuQueryError,
    GpuReading,
    NvidiaSmi,
    QueryCancelled,
)

#: Consecutive failed nvidia-smi queries after which the GPUs are no longer queried.
MAX_GPU_FAILURES = 3

GPU_SERIES: tuple[str, ...] = ("gpu_util", "gpu_mem", "gpu_power")
HOST_SERIES: tuple[str, ...] = ("time", "cpu", "rss")


def _aggregate(readings: Sequence[GpuReading]) -> dict[str, float]:
    """The GPU series' values for one sample: NaN when a selected GPU gave no number."""
    count = len(readings)
    return {
        "gpu_util": sum(r.utilization for r in readings) / count,
        "gpu_mem": sum(r.memory_used for r in readings),
        "gpu_power": sum(r.power_draw for r in readings),
    }


class ResourceMonitor:
    """Samples CPU, memory and GPUs of one process tree every `frequency` seconds.

    `gpus` are nvidia-smi indices (host numbering, as in `exp.gpus`; a string "0,1" is split
    at commas and colons); `nvidia_smi` is the program to query them with, `query_timeout`
    the seconds one query may take. Use: `start(pid)` after the benchmark started, `stop()`
    after it ended; `stop()` returns the series (see the module's table) and `warnings` says
    what could not be measured.
    """

    def __init__(self, frequency: float, gpus: Sequence[str] = (),
                 nvidia_smi: str = "nvidia-smi", query_timeout: float = QUERY_TIMEOUT) -> None:
        if (isinstance(frequency, bool) or not isinstance(frequency, int | float)
                or not math.isfinite(frequency) or frequency <= 0):
            raise ValueError(f"monitor frequency must be a positive number of seconds, "
                             f"got {frequency!r}")
        self.frequency = float(frequency)
        if isinstance(gpus, str):  # "0,1" as exp.gpus writes it, not the characters
            gpus = gpus.replace(":", ",").split(",")
        self.gpus = tuple(str(gpu).strip() for gpu in gpus if str(gpu).strip())
        self.warnings: list[str] = []
        self.samples_taken = 0
        self._nvidia_smi = NvidiaSmi(self.gpus, nvidia_smi, query_timeout) if self.gpus else None
        self._gpu_failures = 0
        self._series: dict[str, list[float]] = {name: [] for name in HOST_SERIES + GPU_SERIES}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._root_start = 0
        self._started_at = 0.0
        self._last_time = 0.0
        self._last_ticks: dict[tuple[int, int], int] = {}

    @property
    def started_at(self) -> float:
        """`time.monotonic()` at `start()`: the zero of the `time` series."""
        return self._started_at

    def warn(self, message: str) -> None:
        """Keep a warning once."""
        if message not in self.warnings:
            self.warnings.append(message)

    def start(self, pid: int) -> None:
        """Start sampling the process tree rooted at `pid` in a background thread."""
        if self._thread is not None:
            raise RuntimeError("this ResourceMonitor was started already")
        self._pid = pid
        self._started_at = time.monotonic()
        if self._nvidia_smi is not None and self._nvidia_smi.locate() is None:
            self.warn(f"no GPU series: {self._nvidia_smi.program} not found or not executable")
            self._nvidia_smi = None
        self._thread = threading.Thread(target=self._loop, name=f"dlbs-monitor-{pid}",
                                        daemon=True)
        root = proc.read_stat(pid)
        if root is None or root.exited:
            self.warn(f"process {pid} ended before the monitor started")
            self._stop.set()
        else:
            # The baseline: CPU time used before now is not the benchmark's to report.
            self._root_start = root.start_ticks
            self._last_time = self._started_at
            tree = proc.process_tree(pid, proc.scan_processes())
            self._last_ticks = {(p.pid, p.start_ticks): p.cpu_ticks for p in tree}
        self._thread.start()

    def stop(self) -> dict[str, list[float]]:
        """Stop sampling (at once, even mid-query) and return the series."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.series()

    def series(self) -> dict[str, list[float]]:
        """Copies of the series; GPU series only where some sample has a GPU reading."""
        result = {name: list(self._series[name]) for name in HOST_SERIES}
        if not self.gpus:
            return result
        for name in GPU_SERIES:
            values = self._series[name]
            if any(not math.isnan(value) for value in values):
                result[name] = list(values)
        if "gpu_util" in result and "gpu_power" not in result:
            # Some GPUs (and MIG slices) report no power draw: say why the series is absent.
            self.warn("no gpu_power series: nvidia-smi reported no power draw")
        return result

    def _loop(self) -> None:
        next_at = self._started_at + self.frequency
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            if not self._sample():
                return
            next_at += self.frequency
            now = time.monotonic()
            if next_at <= now:  # sampling fell behind (a slow query): skip the missed slots
                next_at = now + self.frequency

    def _sample(self) -> bool:
        """Take one sample; False once the tree's root process has ended."""
        now = time.monotonic()
        processes = proc.scan_processes()
        root = processes.get(self._pid)
        if root is None or root.exited or root.start_ticks != self._root_start:
            return False
        tree = proc.process_tree(self._pid, processes)
        ticks = {(p.pid, p.start_ticks): p.cpu_ticks for p in tree}
        # A process not seen before was born since the last sample: all its time is new.
        # A process that exited since then takes its last partial interval with it.
        used = sum(value - self._last_ticks.get(key, 0) for key, value in ticks.items())
        cpu = 100.0 * used / proc.CLOCK_TICKS / max(now - self._last_time, 1e-6)
        gpu_values = self._query_gpus()
        if gpu_values is None:  # stopped mid-query: this sample is dropped whole
            return True
        self._last_ticks = ticks
        self._last_time = now
        self._series["time"].append(round(now - self._started_at, 4))
        self._series["cpu"].append(round(max(cpu, 0.0), 2))
        self._series["rss"].append(round(proc.rss_mib(tree), 3))
        for name, value in gpu_values.items():
            self._series[name].append(value)
        self.samples_taken += 1
        return True

    def _query_gpus(self) -> dict[str, float] | None:
        """GPU values of a sample ({} without GPUs, NaN on failure); None if cancelled."""
        if not self.gpus:
            return {}
        failed = {name: math.nan for name in GPU_SERIES}
        smi = self._nvidia_smi
        if smi is None:
            return failed
        try:
            readings = smi.query(self._stop)
        except QueryCancelled:
            return None
        except GpuQueryError as error:
            self._gpu_failures += 1
            self.warn(f"GPU query failed: {error}")
            if self._gpu_failures >= MAX_GPU_FAILURES:
                self.warn(f"GPUs no longer queried after {MAX_GPU_FAILURES} failures in a row")
                self._nvidia_smi = None
            return failed
        finally:
            for note in smi.notes:
                self.warn(note)
            smi.notes.clear()
        self._gpu_failures = 0
        values = _aggregate([readings[gpu] for gpu in self.gpus if gpu in readings])
        return {name: round(value, 3) for name, value in values.items()}
