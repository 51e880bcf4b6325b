"""A stand-in for NVIDIA's pynvml on a machine without GPUs: the calls dlbs's monitor makes.

Each GPU draws a constant power, so its energy counter is that power times the wall-clock
time (millijoules, as NVML counts them, from an arbitrary zero): a test knows what the
energy of any interval must be. Put this folder first on PYTHONPATH (or pass the module as
`nvml=`). Environment knobs, read at each call:
  FAKE_NVML_GPUS        index:watts,... (default "0:400,1:300")
  FAKE_NVML_NO_ENERGY   set: the energy counter is NOT_SUPPORTED (a GPU older than Volta)
  FAKE_NVML_INIT_ERROR  set: nvmlInit fails with this message (no driver)
  FAKE_NVML_CALLS       a file that gets a line per nvmlInit and nvmlShutdown
  FAKE_NVML_HANG        function names (comma-separated) that never return, as a call into a
                        driver in trouble (e.g. nvmlDeviceGetTotalEnergyConsumption)
  FAKE_NVML_RAISE       NAME:EXCEPTION - function NAME raises the built-in EXCEPTION (not an
                        NVMLError: the binding's own bug, e.g. nvmlDeviceGetPowerUsage:TypeError)
  FAKE_NVML_ENERGY_OFFSET  millijoules added to every energy counter (a test lowers it to
                        make a counter go back, as a driver reload does)
"""

import builtins
import os
import threading
import time
from types import SimpleNamespace

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_INVALID_ARGUMENT = 2
nvmlMemory_v2 = 0x02000028
#: The counters' zero: NVML's counts from the driver's load, which is long before a run.
_ZERO = 1.7e9


class NVMLError(Exception):
    def __init__(self, value, text=""):
        super().__init__(text or f"NVML error {value}")
        self.value = value


def _gpus():
    found = {}
    for item in os.environ.get("FAKE_NVML_GPUS", "0:400,1:300").split(","):
        index, watts = item.split(":")
        found[int(index)] = float(watts)
    return found


def _log(what):
    path = os.environ.get("FAKE_NVML_CALLS")
    if path:
        with open(path, "a") as calls:
            calls.write(what + "\n")


def _trouble(name):
    """Hang or raise in `name` as the environment asks."""
    if name in os.environ.get("FAKE_NVML_HANG", "").split(","):
        _log(f"hang {name}")
        threading.Event().wait()  # never set: the call never returns
    wanted, _, exception = os.environ.get("FAKE_NVML_RAISE", "").partition(":")
    if wanted == name:
        raise getattr(builtins, exception)(f"{name} broke")
    # What a virtual machine's driver may refuse (a passed-through GPU without utilization).
    if name in os.environ.get("FAKE_NVML_NOT_SUPPORTED", "").split(","):
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED, "Not Supported")


def nvmlInit():
    _trouble("nvmlInit")
    # A real driver's init takes a second or more on a GPU machine (an H200: the monitor
    # started 1.5 s after its attempt, and the marks' readings fell outside the interval).
    time.sleep(float(os.environ.get("FAKE_NVML_INIT_SECONDS", "0")))
    message = os.environ.get("FAKE_NVML_INIT_ERROR")
    if message:
        raise NVMLError(1, message)
    _log("init")


def nvmlShutdown():
    _trouble("nvmlShutdown")
    _log("shutdown")


def nvmlDeviceGetHandleByIndex(index):
    _trouble("nvmlDeviceGetHandleByIndex")
    if index not in _gpus():
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument")
    return index


def nvmlDeviceGetUtilizationRates(handle):
    _trouble("nvmlDeviceGetUtilizationRates")
    return SimpleNamespace(gpu=90 + handle, memory=50)


def nvmlDeviceGetMemoryInfo(handle, version=None):
    _trouble("nvmlDeviceGetMemoryInfo")
    return SimpleNamespace(total=80 << 30, used=(10 + handle) << 30, free=(70 - handle) << 30)


def nvmlDeviceGetPowerUsage(handle):
    _trouble("nvmlDeviceGetPowerUsage")
    return int(_gpus()[handle] * 1000)


def nvmlDeviceGetTotalEnergyConsumption(handle):
    _trouble("nvmlDeviceGetTotalEnergyConsumption")
    if os.environ.get("FAKE_NVML_NO_ENERGY"):
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED, "Not Supported")
    offset = float(os.environ.get("FAKE_NVML_ENERGY_OFFSET", "0"))
    return int(_gpus()[handle] * (time.time() - _ZERO) * 1000 + offset)
