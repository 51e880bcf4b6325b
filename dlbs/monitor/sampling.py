"""The sampling core of the resource monitor: a workload's CPU, memory and GPUs over time.

Series, one value per sample, aligned (docs/monitor.md):

| name | unit | what |
|---|---|---|
| `time` | s | when the sample was taken, seconds after `start()` |
| `cpu` | % of one core | CPU time the workload used since the last sample, summed over processes |
| `rss` | MiB | resident memory, summed over the workload's processes |
| `gpu_util` | % | mean utilization of the selected GPUs |
| `gpu_mem` | MiB | memory used on the selected GPUs, summed (the GPUs' totals, all processes) |
| `gpu_power` | W | power draw of the selected GPUs, summed |

The workload is a set of processes chosen anew at every sample: the tree under one process
(`ProcessTree`, what `dlbs run` monitors on this machine) or every process that carries a tag
in its environment (`TaggedProcesses`, what the node monitor of a SLURM job watches). GPU
series exist only when GPUs were named and nvidia-smi answered at least once; a failed query
holds NaN, so every series keeps the length of `time`. Nothing here raises into the run:
problems go to `warnings`.

Stand-alone: this module, `proc` and `gpu` use only the standard library and run on Python
3.8, so that a SLURM job can run them on a compute node where dlbs is not installed.
"""

from __future__ import annotations

import math
import threading
import time

from . import proc
from .gpu import QUERY_TIMEOUT, GpuQueryError, NvidiaSmi, QueryCancelled

#: Consecutive failed nvidia-smi queries after which the GPUs are no longer queried.
MAX_GPU_FAILURES = 3

GPU_SERIES = ("gpu_util", "gpu_mem", "gpu_power")
HOST_SERIES = ("time", "cpu", "rss")


class ProcessTree:
    """The tree under process `pid`; the workload ends when that process has ended."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._start_ticks = 0

    def describe(self) -> str:
        return f"process {self.pid}"

    def begin(self) -> bool:
        """Whether the root runs now (it is remembered by its start time from here on)."""
        root = proc.read_stat(self.pid)
        if root is None or root.exited:
            return False
        self._start_ticks = root.start_ticks
        return True

    def select(self, processes: dict) -> list | None:
        """The workload's processes in a scan; None once the root process has ended."""
        root = processes.get(self.pid)
        if root is None or root.exited or root.start_ticks != self._start_ticks:
            return None
        return proc.process_tree(self.pid, processes)


class TaggedProcesses:
    """Every process whose environment holds `DLBS_MONITOR_TAG=<tag>`, with its descendants.

    A SLURM job's tasks, and the containers they start (the tag is passed into them), carry
    the tag; a process is read once (its environment does not change), by pid and start
    time. `exclude` is the monitor's own pid: its tree (nvidia-smi) is never the workload's.
    The workload never ends by itself: the monitor is stopped.
    """

    def __init__(self, tag: str, exclude: int = 0, proc_root: str = "/proc") -> None:
        self.marker = f"{TAG_VARIABLE}={tag}".encode()
        self.exclude = exclude
        self.proc_root = proc_root
        self._known: dict = {}

    def describe(self) -> str:
        return f"processes tagged {self.marker.decode()}"

    def begin(self) -> bool:
        return True

    def select(self, processes: dict) -> list:
        tagged = []
        for stat in processes.values():
            key = (stat.pid, stat.start_ticks)
            if key not in self._known:
                self._known[key] = proc.environ_has(stat.pid, self.marker, self.proc_root)
            if self._known[key]:
                tagged.append(stat)
        excluded = {p.pid for p in proc.process_tree(self.exclude, processes)} \
            if self.exclude else set()
        chosen: dict = {}
        for stat in tagged:
            for member in proc.process_tree(stat.pid, processes):
                if member.pid not in excluded:
                    chosen[member.pid] = member
        if len(self._known) > 4 * max(len(processes), 256):  # forget processes long gone
            alive = {(p.pid, p.start_ticks) for p in processes.values()}
            self._known = {k: v for k, v in self._known.items() if k in alive}
        return list(chosen.values())


#: The environment variable that marks a SLURM job's processes for its node monitor.
TAG_VARIABLE = "DLBS_MONITOR_TAG"


def _aggregate(readings: list) -> dict:
    """The GPU series' values for one sample: NaN when a selected GPU gave no number."""
    count = len(readings)
    return {
        "gpu_util": sum(r.utilization for r in readings) / count,
        "gpu_mem": sum(r.memory_used for r in readings),
        "gpu_power": sum(r.power_draw for r in readings),
    }


def split_gpus(gpus: object) -> tuple:
    """GPU ids from a list or from `"0,1"` / `"0:1"` as exp.gpus writes them."""
    if isinstance(gpus, str):
        gpus = gpus.replace(":", ",").split(",")
    return tuple(str(gpu).strip() for gpu in gpus if str(gpu).strip())  # type: ignore[union-attr]


class Sampler:
    """Samples one workload's CPU, memory and GPUs every `frequency` seconds, in a thread.

    `gpus` are nvidia-smi indices (host numbering); `nvidia_smi` is the program to query
    them with, `query_timeout` the seconds one query may take. `start(workload)` ...
    `stop()` -> series (see the module's table); `warnings` says what could not be measured.
    """

    def __init__(self, frequency: float, gpus: object = (), nvidia_smi: str = "nvidia-smi",
                 query_timeout: float = QUERY_TIMEOUT) -> None:
        if (isinstance(frequency, bool) or not isinstance(frequency, (int, float))
                or not math.isfinite(frequency) or frequency <= 0):
            raise ValueError(f"monitor frequency must be a positive number of seconds, "
                             f"got {frequency!r}")
        self.frequency = float(frequency)
        self.gpus = split_gpus(gpus)
        self.warnings: list = []
        self.samples_taken = 0
        self._nvidia_smi = NvidiaSmi(self.gpus, nvidia_smi, query_timeout) if self.gpus else None
        self._gpu_failures = 0
        self._series: dict = {name: [] for name in HOST_SERIES + GPU_SERIES}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._workload: ProcessTree | TaggedProcesses | None = None
        self._started_at = 0.0
        self._started_epoch = 0.0
        self._last_time = 0.0
        self._last_ticks: dict = {}

    @property
    def started_at(self) -> float:
        """`time.monotonic()` at `start()`: the zero of the `time` series."""
        return self._started_at

    @property
    def started_epoch(self) -> float:
        """`time.time()` at `start()`: the zero of the `time` series on the wall clock."""
        return self._started_epoch

    def warn(self, message: str) -> None:
        """Keep a warning once."""
        if message not in self.warnings:
            self.warnings.append(message)

    def start_workload(self, workload: ProcessTree | TaggedProcesses) -> None:
        """Start sampling `workload` in a background thread."""
        if self._thread is not None:
            raise RuntimeError("this monitor was started already")
        self._workload = workload
        self._started_at = time.monotonic()
        self._started_epoch = time.time()
        if self._nvidia_smi is not None and self._nvidia_smi.locate() is None:
            self.warn(f"no GPU series: {self._nvidia_smi.program} not found or not executable")
            self._nvidia_smi = None
        self._thread = threading.Thread(target=self._loop, name="dlbs-monitor", daemon=True)
        if not workload.begin():
            self.warn(f"{workload.describe()} ended before the monitor started")
            self._stop.set()
        else:
            # The baseline: CPU time used before now is not the workload's to report.
            self._last_time = self._started_at
            chosen = workload.select(proc.scan_processes()) or []
            self._last_ticks = {(p.pid, p.start_ticks): p.cpu_ticks for p in chosen}
        self._thread.start()

    def stop(self) -> dict:
        """Stop sampling (at once, even mid-query) and return the series."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.series()

    def series(self) -> dict:
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
        """Take one sample; False once the workload has ended."""
        now = time.monotonic()
        assert self._workload is not None
        chosen = self._workload.select(proc.scan_processes())
        if chosen is None:
            return False
        ticks = {(p.pid, p.start_ticks): p.cpu_ticks for p in chosen}
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
        self._series["rss"].append(round(proc.rss_mib(chosen), 3))
        for name, value in gpu_values.items():
            self._series[name].append(value)
        self.samples_taken += 1
        return True

    def _query_gpus(self) -> dict | None:
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
