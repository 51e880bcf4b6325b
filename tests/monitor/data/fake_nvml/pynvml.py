"""A stand-in for NVIDIA's pynvml on a machine without GPUs: the calls dlbs's monitor makes.

Each GPU draws a constant power, so its energy counter is that power times the wall-clock
time (millijoules, as NVML counts them, from an arbitrary zero): a test knows what the
energy of any interval must be. Put this folder first on PYTHONPATH (or pass the module as
`nvml=`). Environment knobs, read at each call:
  FAKE_NVML_GPUS        index:watts,... (default "0:400,1:300")
  FAKE_NVML_NO_ENERGY   set: the energy counter is NOT_SUPPORTED (a GPU older than Volta)
  FAKE_NVML_INIT_ERROR  set: nvmlInit fails with this message (no driver)
  FAKE_NVML_CALLS       a file that gets a line per nvmlInit and nvmlShutdown
"""

import os
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


def nvmlInit():
    message = os.environ.get("FAKE_NVML_INIT_ERROR")
    if message:
        raise NVMLError(1, message)
    _log("init")


def nvmlShutdown():
    _log("shutdown")


def nvmlDeviceGetHandleByIndex(index):
    if index not in _gpus():
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument")
    return index


def nvmlDeviceGetUtilizationRates(handle):
    return SimpleNamespace(gpu=90 + handle, memory=50)


def nvmlDeviceGetMemoryInfo(handle, version=None):
    return SimpleNamespace(total=80 << 30, used=(10 + handle) << 30, free=(70 - handle) << 30)


def nvmlDeviceGetPowerUsage(handle):
    return int(_gpus()[handle] * 1000)


def nvmlDeviceGetTotalEnergyConsumption(handle):
    if os.environ.get("FAKE_NVML_NO_ENERGY"):
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED, "Not Supported")
    return int(_gpus()[handle] * (time.time() - _ZERO) * 1000)
