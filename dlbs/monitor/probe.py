"""Where a result was measured: host, OS, Python, CPU, memory, GPUs, date.

Best effort, like pyperf's metadata collection: every probe that fails is left out and
nothing here ever raises. Call it once per run, not per experiment (nvidia-smi is slow).

Stand-alone (standard library, Python 3.8): a SLURM job's node monitor runs it on each
node; `dlbs.run.environment` adds dlbs's own version to it.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

NVIDIA_SMI_TIMEOUT_S = 10.0


def machine_environment(
    extra: Mapping[str, Any] | None = None, nvidia_smi_timeout: float = NVIDIA_SMI_TIMEOUT_S
) -> dict[str, Any]:
    """Metadata of this machine as plain JSON-able data.

    `extra` (framework version, docker image, ...) is added on top.
    """
    environment: dict[str, Any] = {}
    probes: list[tuple[str, Callable[[], Any]]] = [
        # timezone.utc, not 3.11's datetime.UTC: compute nodes may run Python 3.8.
        ("date", lambda: datetime.now(timezone.utc).isoformat(timespec="seconds")),  # noqa: UP017
        ("host", socket.gethostname),
        ("os", platform.platform),
        ("kernel", platform.release),
        ("python", platform.python_version),
        ("python_implementation", platform.python_implementation),
        ("cpu_model", _cpu_model),
        ("cpu_count", os.cpu_count),
        ("memory_mib", _memory_mib),
    ]
    for name, probe in probes:
        value = _safely(probe)
        if value not in (None, ""):
            environment[name] = value
    gpus = _safely(lambda: _nvidia_gpus(nvidia_smi_timeout))
    if gpus:
        environment.update(gpus)
    if extra:
        environment.update(extra)
    return environment


def _safely(probe: Callable[[], Any]) -> Any:
    try:
        return probe()
    except Exception:  # a probe must never break a benchmark run
        return None


def _cpu_model() -> str | None:
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as stream:
        for line in stream:
            name, _, value = line.partition(":")
            if name.strip() in ("model name", "Model", "cpu model"):
                return value.strip()
    return platform.processor() or None


def _memory_mib() -> int | None:
    with open("/proc/meminfo", encoding="ascii", errors="replace") as stream:
        for line in stream:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return None


def _nvidia_gpus(timeout: float) -> dict[str, Any]:
    """GPU models, memory, driver and CUDA version from nvidia-smi; {} without one."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return {}
    query = subprocess.run(
        [binary, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, timeout=timeout, check=False,
    )
    if query.returncode != 0:
        return {}
    gpus = []
    driver = None
    for line in query.stdout.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 3 or not fields[0]:
            continue
        name, memory, driver = fields
        gpus.append({"name": name, "memory_mib": int(memory) if memory.isdigit() else memory})
    if not gpus:
        return {}
    found: dict[str, Any] = {"gpus": gpus, "gpu_model": gpus[0]["name"], "gpu_count": len(gpus)}
    if driver:
        found["gpu_driver"] = driver
    cuda = _safely(lambda: _cuda_version(binary, timeout))
    if cuda:
        found["cuda_driver_version"] = cuda
    return found


def _cuda_version(binary: str, timeout: float) -> str | None:
    # Only the plain report prints the CUDA version the driver supports.
    report = subprocess.run(
        [binary], capture_output=True, text=True, timeout=timeout, check=False
    )
    marker = "CUDA Version:"
    for line in report.stdout.splitlines():
        if marker in line:
            return line.split(marker, 1)[1].strip(" |").split()[0]
    return None
