"""CPU energy from RAPL, the processors' running energy counters, through Linux's powercap.

`/sys/class/powercap/intel-rapl:<n>/` is one CPU package (the driver has this name on AMD
processors too): `name` says `package-<n>`, `energy_uj` counts microjoules and wraps at
`max_energy_range_uj` (a counter that went back by more than a wrap explains was reset:
`RaplCounters`). The packages are summed; their sub-zones (cores, uncore, DRAM) are
inside a package's count and a `psys` zone (the whole platform, on some laptops) holds the
packages too, so neither is added. What is counted is each package's whole energy, whoever
used it (docs/efficiency.md).

Since 2020 (CVE-2020-8694) `energy_uj` is readable by root only on most distributions: then
`open_rapl` gives the reason and there is no CPU energy, which is not an error.

Stand-alone: standard library only, Python 3.8.
"""

from __future__ import annotations

import os
import time

POWERCAP = "/sys/class/powercap"
#: More than any CPU package draws (the largest server parts are rated near 500 W): a
#: counter that went back by less than the wrap range minus this much energy was reset.
MAX_PACKAGE_WATTS = 1000.0
_ZONE_PREFIX = "intel-rapl:"


class RaplCounters:
    """The energy of the CPU packages since `open_rapl`, in joules, wraps counted.

    A counter lower than at the last read wrapped around, or was reset (a suspend, the
    driver reloaded): a wrap is the one that fits in the time since that read at no more
    than MAX_PACKAGE_WATTS. A reset adds nothing (what the package used across it is not
    known) and is named in `resets` (the monitor takes it from there: a gap in the series).
    """

    def __init__(self, zones: list) -> None:
        self._zones = zones  # (energy_uj path, wrap range, last raw value)
        self._total_uj = 0
        self._read_at = time.monotonic()
        self.resets: list = []

    def read(self) -> float:
        """Joules used by all packages since the counters were opened; OSError if unreadable."""
        updated = []
        now_at = time.monotonic()
        # The most a package can count since the last read, with a second of slack for a
        # reader that was descheduled: more than this after a "wrap" is a reset.
        plausible_uj = MAX_PACKAGE_WATTS * (now_at - self._read_at + 1.0) * 1e6
        for path, wrap, last in self._zones:
            now = _read_int(path)
            step = now - last
            if step < 0:
                step += wrap  # the counter wrapped around (once: it takes minutes to wrap)
                if step > plausible_uj:
                    self.resets.append(f"{os.path.basename(os.path.dirname(path))} (from "
                                       f"{last} to {now} uJ)")
                    step = 0
            self._total_uj += step
            updated.append((path, wrap, now))
        self._zones = updated
        self._read_at = now_at
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
