"""GPU utilization, memory, power and energy through NVML, NVIDIA's management library.

NVML is what nvidia-smi itself calls: asking it directly costs a few library calls per GPU
instead of starting a program per sample (docs/monitor.md measures both), and it has the
counter nvidia-smi's query does not offer, the energy each GPU used since its driver loaded
(`nvmlDeviceGetTotalEnergyConsumption`, millijoules; Volta and newer). The binding is
NVIDIA's own, the `nvidia-ml-py` package (module `pynvml`, a dependency of dlbs, and packed
into the node monitor's zipapp for SLURM nodes where dlbs is not installed).

`open_nvml(gpus, library)` says whether NVML answers for all the chosen GPUs (their
nvidia-smi indices, which are NVML's: neither follows CUDA_VISIBLE_DEVICES); the monitor
uses nvidia-smi when it does not. Every call into NVML runs in a worker thread and is waited
for a bounded time (`bounded.py`): a driver in trouble can make one never return, and then
the run goes on without it. A query never raises into the run: a failure (an `NVMLError`,
any other exception of the binding, no answer in time) is a `GpuQueryError`, as with
nvidia-smi.

Stand-alone: standard library only (plus the optional `pynvml`), Python 3.8.
"""

from __future__ import annotations

import math
import threading

from .bounded import BoundedWorker, CallCancelled, CallTimedOut
from .gpu import QUERY_TIMEOUT, GpuQueryError, GpuReading, QueryCancelled

#: The marker for "import the real binding" (tests pass a module of their own).
AUTO = "auto"
#: Seconds a read may take when the monitor is stopping (the sample at a last mark), and
#: that nvmlShutdown is given at the end.
FINAL_READ_LIMIT = 0.5


def import_nvml() -> object | None:
    """The `pynvml` module of nvidia-ml-py, or None when it is not installed."""
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def _reason(error: Exception) -> str:
    text = str(error).strip()
    return text or type(error).__name__


class NvmlGpus:
    """Reads the GPUs `gpus` (nvidia-smi indices, as strings) through `library` (pynvml).

    Made by `open_nvml`; `query(stop)` has NvidiaSmi's signature, `close()` shuts NVML down.
    Each reading carries `energy_mj`, the GPU's counter (NaN where the GPU has none). The
    calls run in `worker`, each query waited for at most `timeout` seconds.
    """

    program = "NVML"

    def __init__(self, gpus: tuple, library: object, handles: dict,
                 worker: BoundedWorker, timeout: float = QUERY_TIMEOUT,
                 energy_only: bool = False) -> None:
        self.gpus = gpus
        self.library = library
        self.notes: list = []
        self.timeout = timeout
        #: Read the energy counter alone (the energy at the marks: nothing else is kept, and
        #: a level the GPU or the driver will not give must not cost the counter's reading).
        self.energy_only = energy_only
        self._handles = handles
        self._worker = worker
        self._no_counter: set = set()
        self._unreadable: set = set()
        self._memory_v2 = getattr(library, "nvmlMemory_v2", None)

    def query(self, stop: threading.Event | None = None) -> dict:
        """One reading per GPU; GpuQueryError when NVML fails for every one of them.

        Waits at most `timeout` seconds (QueryCancelled once `stop` is set meanwhile); a
        query begun with `stop` already set (the sample at a mark seen last) is given
        FINAL_READ_LIMIT seconds instead.
        """
        limit, cancel = self.timeout, stop
        if stop is not None and stop.is_set():
            limit, cancel = min(self.timeout, FINAL_READ_LIMIT), None
        try:
            found, failures = self._worker.call(  # type: ignore[misc]
                self._read_all, timeout=limit, stop=cancel, what="a reading")
        except CallCancelled:
            raise QueryCancelled() from None
        except CallTimedOut as error:
            raise GpuQueryError(f"NVML: {error}") from None
        except Exception as error:  # noqa: BLE001 - the binding's own bug: never the run's
            raise GpuQueryError(f"NVML failed: {_reason(error)}") from None
        if not found:
            raise GpuQueryError("NVML failed: " + "; ".join(failures))
        self.notes.extend(f"NVML failed for {failure}" for failure in failures)
        return found

    @property
    def counters(self) -> bool:
        """Whether some GPU has an energy counter (as far as the readings told)."""
        return len(self._no_counter) < len(self._handles)

    def _read_all(self) -> tuple:
        """(readings by GPU, failures): what the worker runs for one query."""
        found = {}
        failures = []
        for gpu, handle in self._handles.items():
            try:
                found[gpu] = self._read(gpu, handle)
            except Exception as error:  # noqa: BLE001 - NVMLError, or any other of the binding
                failures.append(f"GPU {gpu}: {_reason(error)}")
        return found, failures

    def _read(self, gpu: str, handle: object) -> GpuReading:
        nvml = self.library
        utilization = memory = power = math.nan
        if not self.energy_only:
            utilization = self._level(gpu, "utilization", lambda: float(
                nvml.nvmlDeviceGetUtilizationRates(handle).gpu))  # type: ignore[attr-defined]
            memory = self._level(gpu, "memory", lambda: float(
                self._memory_used(handle)) / float(1 << 20))
            power = self._optional(nvml.nvmlDeviceGetPowerUsage, handle) / 1000.0  # type: ignore[attr-defined]
        energy = math.nan
        if gpu not in self._no_counter:
            energy = self._optional(nvml.nvmlDeviceGetTotalEnergyConsumption,  # type: ignore[attr-defined]
                                    handle)
            if math.isnan(energy):
                self._no_counter.add(gpu)
                self.notes.append(f"GPU {gpu} has no NVML energy counter: "
                                  "its energy is the integral of its power")
        return GpuReading(gpu, utilization, memory, power, energy)

    def _level(self, gpu: str, name: str, read: object) -> float:
        """One level of a GPU (utilization, memory), NaN where NVML refuses it.

        A refusal is said once per GPU and level; the other readings of the sample, the
        energy counter's among them, are kept.
        """
        try:
            return read()  # type: ignore[operator]
        except _nvml_error(self.library) as error:
            if (gpu, name) not in self._unreadable:
                self._unreadable.add((gpu, name))
                self.notes.append(f"GPU {gpu}: NVML gives no {name}: {_reason(error)}")
            return math.nan

    def _memory_used(self, handle: object) -> int:
        # Version 2 leaves out the memory the driver reserves, as nvidia-smi's memory.used.
        nvml = self.library
        if self._memory_v2 is not None:
            try:
                return nvml.nvmlDeviceGetMemoryInfo(handle, version=self._memory_v2).used  # type: ignore[attr-defined]
            except _nvml_error(nvml):
                self._memory_v2 = None  # an older driver: version 1 from now on
        return nvml.nvmlDeviceGetMemoryInfo(handle).used  # type: ignore[attr-defined]

    def _optional(self, read: object, handle: object) -> float:
        """`read(handle)` as a number, NaN where the GPU does not support it."""
        nvml = self.library
        try:
            return float(read(handle))  # type: ignore[operator]
        except _nvml_error(nvml) as error:
            if getattr(error, "value", None) == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3):
                return math.nan
            raise

    def close(self) -> None:
        """Shut NVML down (once for each successful open), waiting for it a bounded time."""
        _shutdown(self.library, self._worker)


def _nvml_error(nvml: object) -> type:
    """The binding's error class (a stand-in without one: an exception nothing raises)."""
    error = getattr(nvml, "NVMLError", None)
    return error if isinstance(error, type) and issubclass(error, BaseException) else _Never


class _Never(Exception):
    """Raised by nothing: what `except` names when the binding has no NVMLError."""


def _shutdown(nvml: object, worker: BoundedWorker) -> None:
    try:
        worker.call(nvml.nvmlShutdown, timeout=FINAL_READ_LIMIT,  # type: ignore[attr-defined]
                    what="nvmlShutdown")
    except Exception:  # noqa: BLE001 - nothing to do about it at the end of a run
        pass
    worker.close()


def open_nvml(gpus: tuple, library: object = AUTO,
              timeout: float = QUERY_TIMEOUT, energy_only: bool = False) -> tuple:
    """(NvmlGpus for `gpus`, None) when NVML answers for each of them, else (None, reason).

    `library` is the pynvml module (AUTO: import it; None: do not use NVML); `timeout` the
    seconds that starting NVML, and each query later, may take; `energy_only`: its queries
    read the energy counters alone (NvmlGpus).
    """
    if library == AUTO:
        library = import_nvml()
        if library is None:
            return None, "the nvidia-ml-py package (pynvml) is not installed"
    if library is None:
        return None, "NVML is not used"
    nvml = library
    worker = BoundedWorker("dlbs-monitor-nvml")

    def find_handles() -> dict:
        nvml.nvmlInit()  # type: ignore[attr-defined]
        handles = {}
        try:
            for gpu in gpus:
                try:
                    handles[gpu] = nvml.nvmlDeviceGetHandleByIndex(int(gpu))  # type: ignore[attr-defined]
                except Exception as error:  # noqa: BLE001 - any failure: not this GPU
                    raise LookupError(f"NVML has no GPU {gpu}: {_reason(error)}") from error
        except LookupError:
            nvml.nvmlShutdown()  # type: ignore[attr-defined]
            raise
        return handles

    try:
        handles = worker.call(find_handles, timeout=timeout, what="nvmlInit")
    except LookupError as error:
        worker.close()
        return None, str(error)
    except CallTimedOut as error:
        worker.close()
        return None, f"NVML: {error}"
    except Exception as error:  # noqa: BLE001 - no driver, no library, a wrong binding
        worker.close()
        return None, f"NVML: {_reason(error)}"
    return NvmlGpus(tuple(gpus), nvml, handles, worker, timeout,  # type: ignore[arg-type]
                    energy_only), None
