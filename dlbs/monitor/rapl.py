"""CPU energy from RAPL, the processors' running energy counters, through Linux's powercap.

`/sys/class/powercap/intel-rapl:<n>/` is one CPU package (the driver has this name on AMD
processors too): `name` says `package-<n>`, `energy_uj` counts microjoules and wraps at
`max_energy_range_uj`. The packages are summed; their sub-zones (cores, uncore, DRAM) are
inside a package's count and a `psys` zone (the whole platform, on some laptops) holds the
packages too, so neither is added. What is counted is each package's whole energy, whoever
used it (docs/efficiency.md).

Since 2020 (CVE-2020-8694) `energy_uj` is readable by root only on most distributions: then
`open_rapl` gives the reason and there is no CPU energy, which is not an error.

Stand-alone: standard library only, Python 3.8.
"""

from __future__ import annotations

import os

POWERCAP = "/sys/class/powercap"
_ZONE_PREFIX = "intel-rapl:"


class RaplCounters:
    """The energy of the CPU packages since `open_rapl`, in joules, wraps counted."""

    def __init__(self, zones: list) -> None:
        self._zones = zones  # (energy_uj path, wrap range, last raw value)
        self._total_uj = 0

    def read(self) -> float:
        """Joules used by all packages since the counters were opened; OSError if unreadable."""
        updated = []
        for path, wrap, last in self._zones:
            now = _read_int(path)
            step = now - last
            if step < 0:  # the counter wrapped around (once: it takes minutes to wrap)
                step += wrap
            self._total_uj += step
            updated.append((path, wrap, now))
        self._zones = updated
        return self._total_uj / 1e6


def _read_int(path: str) -> int:
    with open(path, encoding="ascii") as stream:
        return int(stream.read().strip())


def open_rapl(root: str = POWERCAP) -> tuple:
    """(RaplCounters, None) when every CPU package's counter can be read, else (None, reason)."""
    try:
        names = sorted(name for name in os.listdir(root)
                       if name.startswith(_ZONE_PREFIX) and name.count(":") == 1)
    except OSError as error:
        return None, f"no RAPL counters: {root}: {error.strerror or error}"
    zones = []
    for name in names:
        folder = os.path.join(root, name)
        try:
            with open(os.path.join(folder, "name"), encoding="ascii") as stream:
                if not stream.read().strip().startswith("package"):
                    continue
            energy = os.path.join(folder, "energy_uj")
            zones.append((energy, _read_int(os.path.join(folder, "max_energy_range_uj")) + 1,
                          _read_int(energy)))
        except (OSError, ValueError) as error:
            detail = getattr(error, "strerror", None) or error
            return None, f"RAPL counters not readable: {folder}: {detail}"
    if not zones:
        return None, f"no RAPL package counters in {root}"
    return RaplCounters(zones), None
