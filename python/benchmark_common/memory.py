"""A backend's own peak memory, the same way in every backend (standard library, 3.8+)."""

from __future__ import annotations

import resource
import sys


def peak_rss_mib() -> float:
    """Peak resident memory of this process, MiB (Linux reports KiB, macOS bytes).

    VmHWM first: Linux carries ru_maxrss across exec, so a backend started by a big process
    (torchrun, pytest) would otherwise report its parent's peak.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0
