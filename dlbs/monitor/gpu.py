"""GPU utilization, memory and power of chosen GPUs, one `nvidia-smi` query per sample.

The monitor asks NVML directly when it can (`nvml.py`: cheaper, and with an energy counter);
nvidia-smi, which comes with every driver, is the way when it cannot. A query runs with a
time limit and can be cut short by the monitor's stop; it never raises into the run: a
failure is a `GpuQueryError` with a reason the monitor keeps as a warning.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass

#: The query: one CSV line per GPU, numbers without units.
QUERY_ARGS: tuple[str, ...] = (
    "--query-gpu=index,utilization.gpu,memory.used,power.draw",
    "--format=csv,noheader,nounits",
)
#: Seconds one query may take. nvidia-smi answers in well under a second on a healthy node;
#: a driver in trouble can make it hang, and then its sample is given up.
QUERY_TIMEOUT = 5.0
#: How often a running query checks whether the monitor is stopping, seconds.
_STOP_POLL = 0.05


class GpuQueryError(Exception):
    """A query that gave no reading; the message says why."""


class QueryCancelled(Exception):
    """The monitor stopped while a query was running."""


@dataclass(frozen=True)
class GpuReading:
    """One GPU at one moment; NaN where nvidia-smi said `[N/A]` or `[Not Supported]`."""

    index: str
    utilization: float  # percent
    memory_used: float  # MiB, the whole GPU's, not only the monitored processes'
    power_draw: float  # W
    energy_mj: float = math.nan  # the GPU's energy counter (NVML only), mJ since driver load


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def parse_query_output(text: str) -> tuple[list[GpuReading], list[str]]:
    """Readings from the query's CSV output, and a message for each line that is not one."""
    readings: list[GpuReading] = []
    problems: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 4 or not fields[0].isdigit():
            problems.append(f"unexpected nvidia-smi output line {line.strip()[:200]!r}")
            continue
        index, utilization, memory, power = fields
        readings.append(GpuReading(index, _number(utilization), _number(memory), _number(power)))
    return readings, problems


def _kill_group(process: subprocess.Popen[str]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def _run(argv: Sequence[str], timeout: float, stop: threading.Event) -> str:
    """Run `argv`, return its stdout; GpuQueryError on failure, QueryCancelled on `stop`."""
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, errors="replace",
            # Its own process group, so that a wrapper script is stopped with its children:
            # a child left behind would hold the pipe open and block the reading of it.
            start_new_session=True,
        )
    except OSError as error:
        raise GpuQueryError(f"cannot run {argv[0]}: {error.strerror or error}") from error
    waited = 0.0
    while True:
        try:
            stdout, stderr = process.communicate(timeout=_STOP_POLL)
            break
        except subprocess.TimeoutExpired:
            waited += _STOP_POLL
            if stop.is_set() or waited >= timeout:
                _kill_group(process)
                process.communicate()
                if stop.is_set():
                    raise QueryCancelled() from None
                raise GpuQueryError(f"{argv[0]} gave no answer within {timeout:g} s") from None
    if process.returncode != 0:
        detail = (stderr.strip() or stdout.strip()).splitlines()
        reason = detail[0][:200] if detail else "no output"
        raise GpuQueryError(f"{argv[0]} exited with status {process.returncode}: {reason}")
    return stdout


def list_gpus(program: str = "nvidia-smi", timeout: float = QUERY_TIMEOUT) -> list[str] | None:
    """The indices of the GPUs nvidia-smi lists; None when it is not installed.

    GpuQueryError when it is installed but gives no answer (a driver in trouble), so that a
    caller can tell "no GPU here" from "cannot say".
    """
    path = shutil.which(program)
    if path is None:
        return None
    readings, _ = parse_query_output(_run([path, *QUERY_ARGS], timeout, threading.Event()))
    return [reading.index for reading in readings]


class NvidiaSmi:
    """Queries nvidia-smi for the GPUs `gpus` (nvidia-smi indices, as strings)."""

    def __init__(self, gpus: Sequence[str], program: str = "nvidia-smi",
                 timeout: float = QUERY_TIMEOUT) -> None:
        self.gpus = tuple(gpus)
        self.program = program
        self.timeout = timeout
        self.notes: list[str] = []  # problems that did not stop a query from giving readings

    def locate(self) -> str | None:
        """The program's path, or None when it cannot be found or run."""
        return shutil.which(self.program)

    def query(self, stop: threading.Event) -> dict[str, GpuReading]:
        """One reading per selected GPU that nvidia-smi listed; GpuQueryError if none."""
        output = _run([self.program, *QUERY_ARGS], self.timeout, stop)
        readings, problems = parse_query_output(output)
        self.notes.extend(problems)
        found = {reading.index: reading for reading in readings if reading.index in self.gpus}
        missing = [gpu for gpu in self.gpus if gpu not in found]
        if not found:
            listed = ", ".join(reading.index for reading in readings) or "none"
            raise GpuQueryError(f"nvidia-smi does not list GPU {', '.join(self.gpus)} "
                                f"(it lists: {listed})")
        if missing:
            self.notes.append(f"nvidia-smi does not list GPU {', '.join(missing)}")
        return found

    def close(self) -> None:
        """Nothing to release: each query is a program of its own."""
