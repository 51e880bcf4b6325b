"""Where a result was measured: the machine (`dlbs.monitor.probe`) plus dlbs's version."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dlbs import __version__
from dlbs.monitor.probe import NVIDIA_SMI_TIMEOUT_S, machine_environment


def collect_environment(
    extra: Mapping[str, Any] | None = None, nvidia_smi_timeout: float = NVIDIA_SMI_TIMEOUT_S
) -> dict[str, Any]:
    """Metadata of this machine as plain JSON-able data, with `dlbs_version`.

    `extra` (framework version, docker image, ...) is added on top. Never raises.
    """
    environment = machine_environment(nvidia_smi_timeout=nvidia_smi_timeout)
    environment["dlbs_version"] = __version__
    if extra:
        environment.update(extra)
    return environment
