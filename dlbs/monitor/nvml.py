"""GPU utilization, memory, power and energy through NVML, NVIDIA's management library.

NVML is what nvidia-smi itself calls: asking it directly costs a few library calls per GPU
instead of starting a program per sample (docs/monitor.md measures both), and it has the
counter nvidia-smi's query does not offer, the energy each GPU used since its driver loaded
(`nvmlDeviceGetTotalEnergyConsumption`, millijoules; Volta and newer). The binding is
NVIDIA's own, the `nvidia-ml-py` package (module `pynvml`, a dependency of dlbs, and packed
into the node monitor's zipapp for SLURM nodes where dlbs is not installed).

`open_nvml(gpus, library)` says whether NVML answers for all the chosen GPUs (their
nvidia-smi indices, which are NVML's: neither follows CUDA_VISIBLE_DEVICES); the monitor
uses nvidia-smi when it does not. A query never raises into the run: a failure is a
`GpuQueryError`, as with nvidia-smi.

Stand-alone: standard library only (plus the optional `pynvml`), Python 3.8.
"""

from __future__ import annotations

import math
import threading

from .gpu import GpuQueryError, GpuReading

#: The marker for "import the real binding" (tests pass a module of their own).
AUTO = "auto"


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
    Each reading carries `energy_mj`, the GPU's counter (NaN where the GPU has none).
    """

    program = "NVML"

    def __init__(self, gpus: tuple, library: object, handles: dict) -> None:
        self.gpus = gpus
        self.library = library
        self.notes: list = []
        self._handles = handles
        self._no_counter: set = set()
        self._memory_v2 = getattr(library, "nvmlMemory_v2", None)
        self._lock = threading.Lock()  # the sampling thread and stop() may both read

    def query(self, stop: threading.Event | None = None) -> dict:
        """One reading per GPU; GpuQueryError when NVML fails for every one of them."""
        nvml = self.library
        found = {}
        failures = []
        with self._lock:
            for gpu, handle in self._handles.items():
                try:
                    utilization = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                    memory = float(self._memory_used(handle)) / float(1 << 20)
                    power = self._optional(nvml.nvmlDeviceGetPowerUsage, handle) / 1000.0
                    energy = math.nan
                    if gpu not in self._no_counter:
                        energy = self._optional(nvml.nvmlDeviceGetTotalEnergyConsumption,
                                                handle)
                        if math.isnan(energy):
                            self._no_counter.add(gpu)
                            self.notes.append(f"GPU {gpu} has no NVML energy counter: "
                                              "its energy is the integral of its power")
                except nvml.NVMLError as error:  # type: ignore[attr-defined]
                    failures.append(f"GPU {gpu}: {_reason(error)}")
                    continue
                found[gpu] = GpuReading(gpu, utilization, memory, power, energy)
        if not found:
            raise GpuQueryError("NVML failed: " + "; ".join(failures))
        self.notes.extend(f"NVML failed for {failure}" for failure in failures)
        return found

    def _memory_used(self, handle: object) -> int:
        # Version 2 leaves out the memory the driver reserves, as nvidia-smi's memory.used.
        nvml = self.library
        if self._memory_v2 is not None:
            try:
                return nvml.nvmlDeviceGetMemoryInfo(handle, version=self._memory_v2).used
            except nvml.NVMLError:  # type: ignore[attr-defined]
                self._memory_v2 = None  # an older driver: version 1 from now on
        return nvml.nvmlDeviceGetMemoryInfo(handle).used

    def _optional(self, read: object, handle: object) -> float:
        """`read(handle)` as a number, NaN where the GPU does not support it."""
        nvml = self.library
        try:
            return float(read(handle))  # type: ignore[operator]
        except nvml.NVMLError as error:  # type: ignore[attr-defined]
            if getattr(error, "value", None) == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3):
                return math.nan
            raise

    def close(self) -> None:
        """Shut NVML down (once for each successful open)."""
        try:
            self.library.nvmlShutdown()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - nothing to do about it at the end of a run
            pass


def open_nvml(gpus: tuple, library: object = AUTO) -> tuple:
    """(NvmlGpus for `gpus`, None) when NVML answers for each of them, else (None, reason).

    `library` is the pynvml module (AUTO: import it; None: do not use NVML).
    """
    if library == AUTO:
        library = import_nvml()
        if library is None:
            return None, "the nvidia-ml-py package (pynvml) is not installed"
    if library is None:
        return None, "NVML is not used"
    nvml = library
    try:
        nvml.nvmlInit()  # type: ignore[attr-defined]
    except Exception as error:  # noqa: BLE001 - no driver, no library, a wrong binding
        return None, f"NVML: {_reason(error)}"
    handles = {}
    try:
        for gpu in gpus:
            handles[gpu] = nvml.nvmlDeviceGetHandleByIndex(int(gpu))  # type: ignore[attr-defined]
    except Exception as error:  # noqa: BLE001
        NvmlGpus(gpus, nvml, {}).close()
        return None, f"NVML has no GPU {gpu}: {_reason(error)}"
    return NvmlGpus(tuple(gpus), nvml, handles), None
