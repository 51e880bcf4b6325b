"""The sampling core of the resource monitor: a workload's CPU, memory and GPUs over time.

Series, one value per sample, aligned (docs/monitor.md):

| name | unit | what |
|---|---|---|
| `time` | s | when the sample was taken (mid counter reads), seconds after `start()` |
| `cpu` | % of one core | CPU time the workload used since the last sample, summed over processes |
| `rss` | MiB | resident memory, summed over the workload's processes |
| `gpu_util` | % | mean utilization of the selected GPUs |
| `gpu_mem` | MiB | memory used on the selected GPUs, summed (the GPUs' totals, all processes) |
| `gpu_power` | W | power draw of the selected GPUs, summed |
| `gpu_energy` | J | energy of the selected GPUs since the first reading, summed (NVML's counter) |
| `gpu<i>_energy` | J | the same of GPU `<i>` alone, when several GPUs are selected |
| `cpu_energy` | J | energy of the CPU packages since the first reading (RAPL), without GPUs |

The workload is a set of processes chosen anew at every sample: the tree under one process
(`ProcessTree`, what `dlbs run` monitors on this machine) or every process that carries a tag
in its environment (`TaggedProcesses`, what the node monitor of a SLURM job watches). GPU
series exist only when GPUs were named and NVML or nvidia-smi answered at least once; a failed
query holds NaN, so every series keeps the length of `time`. The energy series are counters
(differences of them are energy, never negative: a counter that went back is a gap, listed
in `energy_gaps`); when there is none, `energy_unavailable` (a text, not a series) says why.
Given the benchmark's log, the sampler also takes a sample as soon as the backend marks the
start or the end of its timed interval there (`logmarks`); with a frequency of 0 those are
its only samples, and only `time` and the energy counters are kept (the energy at the marks,
what `dlbs run` does by default). Nothing here raises into the run: problems go to
`warnings`; every read of a source is bounded, and `stop()` never waits on one for long.

Stand-alone: this module, `proc`, `gpu`, `nvml`, `rapl` and `logmarks` use only the standard
library (and the optional pynvml) and run on Python 3.8, so that a SLURM job can run them on
a compute node where dlbs is not installed.
"""

from __future__ import annotations

import math
import threading
import time

from . import proc
from .gpu import QUERY_TIMEOUT, GpuQueryError, NvidiaSmi, QueryCancelled
from .logmarks import LogMarks
from .nvml import AUTO, NvmlGpus, open_nvml
from .rapl import POWERCAP, open_rapl

#: Consecutive failed GPU queries (NVML or nvidia-smi) after which the GPUs are no longer queried.
MAX_GPU_FAILURES = 3

GPU_SERIES = ("gpu_util", "gpu_mem", "gpu_power")
HOST_SERIES = ("time", "cpu", "rss")
GPU_ENERGY = "gpu_energy"
CPU_ENERGY = "cpu_energy"
#: The key of the reason there is no energy counter series (a text among the series).
ENERGY_UNAVAILABLE = "energy_unavailable"
#: How the names of the energy counters' series end.
COUNTER_SUFFIX = "energy"
#: Seconds between looks at the log for the timed interval's marks.
MARK_POLL = 0.02
#: The most seconds `stop()` waits for the sampling thread (its last sample included).
STOP_LIMIT = 1.0
#: Seconds between RAPL reads when no sample is due sooner (the energy at the marks only):
#: often enough to see each wrap of its counters (minutes apart) and tell it from a reset.
RAPL_KEEP_S = 10.0
#: The key of the counters' gaps: where a counter went back between two samples (a RAPL
#: counter reset, an NVML counter lower than before). A list of {"sample": i (the energy
#: between samples i-1 and i is unknown), "counter": which, "what": what it did}.
ENERGY_GAPS = "energy_gaps"


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


def gpu_energy_series(gpu: str) -> str:
    """The name of one GPU's own energy series."""
    return f"gpu{gpu}_energy"


def split_gpus(gpus: object) -> tuple:
    """GPU ids from a list or from `"0,1"` / `"0:1"` as exp.gpus writes them."""
    if isinstance(gpus, str):
        gpus = gpus.replace(":", ",").split(",")
    return tuple(str(gpu).strip() for gpu in gpus if str(gpu).strip())  # type: ignore[union-attr]


class Sampler:
    """Samples one workload's CPU, memory and GPUs every `frequency` seconds, in a thread.

    `gpus` are nvidia-smi indices (host numbering), read through NVML (`nvml`: the pynvml
    module, AUTO to import it, None never) or else the program `nvidia_smi`, with
    `query_timeout` the seconds one query may take. Without GPUs the CPU packages' energy is
    read from RAPL under `rapl_root` (None: not read). `log` is the benchmark's log, followed
    for the timed interval's marks. `start_workload(workload)` ... `stop()` -> series (see
    the module's table); `warnings` says what could not be measured.

    A `frequency` of 0 takes no sample of its own: only the energy counters, read at the
    backend's two marks (`log` is then required), and `time` (ENERGY_AT_MARKS).
    """

    def __init__(self, frequency: float, gpus: object = (), nvidia_smi: str = "nvidia-smi",
                 query_timeout: float = QUERY_TIMEOUT, nvml: object = AUTO,
                 rapl_root: str | None = POWERCAP, log: str | None = None) -> None:
        if (isinstance(frequency, bool) or not isinstance(frequency, (int, float))
                or not math.isfinite(frequency) or frequency < 0 or (frequency == 0 and not log)):
            raise ValueError(f"monitor frequency must be a positive number of seconds (0: "
                             f"the energy at the timed marks only, which needs the log), got "
                             f"{frequency!r}")
        self.frequency = float(frequency)
        #: Only the energy counters at the marks (frequency 0): no process scan, no GPU
        #: levels, no nvidia-smi (it has no counter).
        self.marks_only = self.frequency == 0
        self.gpus = split_gpus(gpus)
        self.warnings: list = []
        self.samples_taken = 0
        self._gpu_query = NvidiaSmi(self.gpus, nvidia_smi, query_timeout) if self.gpus else None
        self._query_timeout = query_timeout
        self._nvml = nvml
        self._rapl_root = rapl_root
        self._rapl = None
        self._rapl_read_at = 0.0
        self._marks = LogMarks(log) if log else None
        self.energy_unavailable: str | None = None
        self._energy_base: dict = {}
        self._energy_last: dict = {}
        self._gaps: list = []
        self._gpu_failures = 0
        energy = [GPU_ENERGY, CPU_ENERGY]
        if len(self.gpus) > 1:
            energy += [gpu_energy_series(gpu) for gpu in self.gpus]
        self._series: dict = {name: [] for name in HOST_SERIES + GPU_SERIES + tuple(energy)}
        # The sampling thread appends under it; a stop that gave up waiting for the thread
        # (a source that does not return) sets `_closed`, and a late sample is dropped.
        self._series_lock = threading.Lock()
        self._closed = False
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
        if self._marks is not None:
            # Before the counters open (NVML's init takes a second or more on a GPU machine):
            # a mark the backend prints meanwhile is still seen, and read once they are open.
            self._marks.start()
        self._open_counters()
        if self.marks_only and self._gpu_query is None and self._rapl is None:
            self._marks = None  # no counter to read at the marks: `energy_unavailable` says why
            self._stop.set()
        self._started_at = time.monotonic()
        self._started_epoch = time.time()
        self._thread = threading.Thread(target=self._run, name="dlbs-monitor", daemon=True)
        if not workload.begin():
            self.warn(f"{workload.describe()} ended before the monitor started")
            self._stop.set()
        elif not self.marks_only:
            # The baseline: CPU time used before now is not the workload's to report.
            self._last_time = self._started_at
            chosen = workload.select(proc.scan_processes()) or []
            self._last_ticks = {(p.pid, p.start_ticks): p.cpu_ticks for p in chosen}
        self._thread.start()

    def _open_counters(self) -> None:
        """Choose the GPU query (NVML, else nvidia-smi) or, without GPUs, open RAPL."""
        if self.gpus:
            nvml, reason = open_nvml(self.gpus, self._nvml, self._query_timeout,
                                     energy_only=self.marks_only)
            if nvml is not None:
                self._gpu_query = nvml  # type: ignore[assignment]
                return
            self.energy_unavailable = f"no GPU energy counter: {reason}"
            if self.marks_only:  # nvidia-smi has no counter: nothing to read at the marks
                self._gpu_query = None
            elif self._gpu_query is not None and self._gpu_query.locate() is None:
                self.warn(f"no GPU series: {self._gpu_query.program} not found or not "
                          "executable")
                self._gpu_query = None
            return
        if self._rapl_root is None:
            return
        self._rapl, reason = open_rapl(self._rapl_root)
        self._rapl_read_at = time.monotonic()
        if self._rapl is None:
            self.energy_unavailable = reason

    def stop(self) -> dict:
        """Stop sampling and return the series, waiting for the thread a bounded time.

        A mark the backend printed just before it ended, which the sampling thread had not
        seen yet, still gets its sample, in that thread, when the readings are quick (NVML
        within FINAL_READ_LIMIT, RAPL; an nvidia-smi query is not waited for). A source
        that does not return (a hung driver) never holds the stop up for longer than
        STOP_LIMIT: the series end where they are, with a warning.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_LIMIT)
            if self._thread.is_alive():
                self.warn(f"the monitor did not stop within {STOP_LIMIT:g} s (a reading "
                          "that does not return): its series end at its last sample")
        with self._series_lock:
            self._closed = True
            result = self.series()
        if self._gpu_query is not None and not self._thread_alive():
            self._gpu_query.close()
        return result

    def _thread_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def series(self) -> dict:
        """Copies of the series; GPU series only where some sample has a GPU reading."""
        hosts = ("time",) if self.marks_only else HOST_SERIES
        result: dict = {name: list(self._series[name]) for name in hosts}
        for name in self._series:
            values = self._series[name]
            if name in HOST_SERIES or (self.marks_only and not name.endswith(COUNTER_SUFFIX)):
                continue
            if any(not math.isnan(value) for value in values):
                result[name] = list(values)
        if GPU_ENERGY not in result and CPU_ENERGY not in result:
            reason = self._no_energy_reason(result)
            if reason:
                result[ENERGY_UNAVAILABLE] = reason
        if self._gaps:
            result[ENERGY_GAPS] = [dict(gap) for gap in self._gaps]
        if not self.gpus or self.marks_only:
            return result
        if "gpu_util" in result and "gpu_power" not in result:
            # Some GPUs (and MIG slices) report no power draw: say why the series is absent.
            program = "NVML" if isinstance(self._gpu_query, NvmlGpus) else "nvidia-smi"
            self.warn(f"no gpu_power series: {program} reported no power draw")
        return result

    def _no_energy_reason(self, result: dict) -> str | None:
        """Why the series have no energy counter (None: no energy was asked for)."""
        if self.energy_unavailable is not None:
            return self.energy_unavailable
        if self.marks_only and not result["time"]:
            return ("no reading of the energy counters: the backend marked no timed interval "
                    "(results.timed_start, results.timed_end)")
        if self.gpus and ("gpu_util" in result or self.marks_only):
            if isinstance(self._gpu_query, NvmlGpus) and not self._gpu_query.counters:
                return "no GPU energy counter: the GPUs report none (older than Volta?)"
            return "no GPU energy reading: the GPU queries failed (see the warnings)"
        return None

    def _run(self) -> None:
        """The thread: the loop, and the sample at a mark seen last; never a traceback."""
        try:
            self._loop()
            if self._marks is not None and self._marks.poll():
                self._sample(at_mark=True)
        except Exception as error:  # noqa: BLE001 - a bug or a source's surprise: said, not raised
            self.warn(f"the monitor stopped sampling: {type(error).__name__}: {error}")

    def _loop(self) -> None:
        """Sample on the schedule and at each mark until stopped.

        Once the workload has ended there are no more scheduled samples, but the log is
        still followed for marks until the stop (a container's log can arrive late).
        """
        ended = False
        period = self.frequency if not self.marks_only else RAPL_KEEP_S
        next_at = self._started_at + period
        while True:
            wait = next_at - time.monotonic()
            if self._marks is not None:
                # A plain sleep: half the CPU of an Event's timed wait per look (the looks
                # are most of what the energy at the marks costs), a stop seen within one.
                time.sleep(max(0.0, min(wait, MARK_POLL)))
                if self._stop.is_set():
                    return
            elif ended or self._stop.wait(max(0.0, wait)):
                return
            if self._marks is not None and self._marks.poll():
                if not self._sample(at_mark=True):
                    ended = True
                if self._closed:
                    return
                continue
            if time.monotonic() < next_at:
                continue
            if self.marks_only:
                self._keep_rapl()
            elif not ended and not self._sample():
                ended = True
            next_at += period
            now = time.monotonic()
            if next_at <= now:  # sampling fell behind (a slow query): skip the missed slots
                next_at = now + period

    def _keep_rapl(self) -> None:
        """Read RAPL between the marks, so that a wrap of its counters is seen and counted."""
        if self._rapl is not None and time.monotonic() - self._rapl_read_at >= RAPL_KEEP_S:
            self._read_rapl()

    def _sample(self, at_mark: bool = False) -> bool:
        """Take one sample; False once the workload has ended.

        A sample `at_mark` (the backend just marked its timed interval) is taken even when
        the workload has ended meanwhile: its CPU and memory are NaN then, its counters not.
        """
        assert self._workload is not None
        before = time.monotonic()
        gpu_values = self._query_gpus()
        if gpu_values is None:  # stopped mid-query: this sample is dropped whole
            return True
        cpu_energy = self._read_rapl()
        # The sample's time is the middle of the counters' reads: the energy of an interval
        # is read between two samples' times, and the process scan below takes tens of
        # milliseconds on a busy machine (a timed second read 2 % too much energy when the
        # time was taken before it).
        now = time.monotonic()  # also the process scan's moment: it starts right after
        stamp = (before + now) / 2
        cpu = rss = math.nan
        chosen = None
        if not self.marks_only:
            chosen = self._workload.select(proc.scan_processes())
            if chosen is None and not at_mark:
                return False
        if chosen is not None:
            ticks = {(p.pid, p.start_ticks): p.cpu_ticks for p in chosen}
            # A process not seen before was born since the last sample: all its time is
            # new. A process that exited since then takes its last partial interval with it.
            used = sum(value - self._last_ticks.get(key, 0) for key, value in ticks.items())
            cpu = round(max(100.0 * used / proc.CLOCK_TICKS / max(now - self._last_time, 1e-6),
                            0.0), 2)
            rss = round(proc.rss_mib(chosen), 3)
            self._last_ticks = ticks
            self._last_time = now
        with self._series_lock:
            if self._closed:  # the stop gave up waiting for this sample
                return False
            self._series["time"].append(round(stamp - self._started_at, 4))
            self._series["cpu"].append(cpu)
            self._series["rss"].append(rss)
            for name, value in gpu_values.items():
                self._series[name].append(value)
            self._series[CPU_ENERGY].append(cpu_energy)
            self.samples_taken += 1
        return chosen is not None or self.marks_only

    def _read_rapl(self) -> float:
        """The CPU packages' joules since RAPL was opened; NaN without it."""
        if self._rapl is None:
            return math.nan
        try:
            joules = self._rapl.read()
        except (OSError, ValueError) as error:
            self.warn(f"RAPL counters no longer readable: {error}")
            self._rapl = None
            return math.nan
        self._rapl_read_at = time.monotonic()
        for reset in self._rapl.resets:
            self._gap(f"RAPL counter {reset}", "was reset")
        self._rapl.resets.clear()
        return round(joules, 6)

    def _gap(self, counter: str, what: str) -> None:
        """A counter that went back before the sample about to be appended (see ENERGY_GAPS)."""
        self._gaps.append({"sample": len(self._series["time"]), "counter": counter,
                           "what": what})
        self.warn(f"the {counter} {what}: the energy of an interval across it is unknown")

    def _query_gpus(self) -> dict | None:
        """GPU values of a sample ({} without GPUs, NaN on failure); None if cancelled."""
        if not self.gpus:
            return {}
        failed = {name: math.nan for name in self._series
                  if name.startswith("gpu") and name not in HOST_SERIES}
        smi = self._gpu_query  # NVML or nvidia-smi
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
                smi.close()
                self._gpu_query = None
            return failed
        finally:
            for note in smi.notes:
                self.warn(note)
            smi.notes.clear()
        self._gpu_failures = 0
        values = _aggregate([readings[gpu] for gpu in self.gpus if gpu in readings])
        values.update(self._energy(readings))
        return {name: round(value, 3) for name, value in values.items()}

    def _energy(self, readings: dict) -> dict:
        """The energy series' values: joules since each GPU's first counter reading.

        The sum is NaN when a selected GPU gave no counter reading in this sample. A counter
        that went back (a driver reloaded, a reset) is never negative energy: the series
        continues from its last value and the step is a gap (ENERGY_GAPS).
        """
        own = {}
        for gpu in self.gpus:
            reading = readings.get(gpu)
            counter = reading.energy_mj if reading is not None else math.nan
            if not math.isnan(counter):
                last = self._energy_last.get(gpu)
                if last is not None and counter < last:
                    self._gap(f"NVML energy counter of GPU {gpu}",
                              f"went back by {(last - counter) / 1000.0:.6g} J")
                    base = self._energy_base[gpu]
                    self._energy_base[gpu] = counter - (last - base)
                self._energy_last[gpu] = counter
                base = self._energy_base.setdefault(gpu, counter)
                own[gpu] = (counter - base) / 1000.0
            else:
                own[gpu] = math.nan
        values = {GPU_ENERGY: math.fsum(own.values())}
        if len(self.gpus) > 1:
            values.update({gpu_energy_series(gpu): joules for gpu, joules in own.items()})
        return values
