"""Moments on the device's timeline, taken without waiting for the device.

On a GPU a stamp is a CUDA event recorded on the current stream: it marks when the device
reaches that point of the work queued before it, and taking it costs the host a few
microseconds, so a run of decode steps is stamped step by step while the device keeps its
queue. `wait(stamp)` blocks until the device has passed it (the GIL released meanwhile);
`ms(a, b)` is the device time between two passed stamps. On the CPU work is done when its
call returns: a stamp is the host's clock.
"""

from __future__ import annotations

import time
from typing import Any

import torch


class Stamps:
    """Stamps of one device (see the module)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.on_gpu = device.type == "cuda"

    def now(self) -> Any:
        """A stamp of this moment of the current stream's queue."""
        if not self.on_gpu:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def wait(self, stamp: Any) -> None:
        """Until the device has passed `stamp`."""
        if self.on_gpu:
            stamp.synchronize()

    def done(self, stamp: Any) -> bool:
        """Whether the device has passed `stamp` (never blocks)."""
        return not self.on_gpu or stamp.query()

    def ms(self, start: Any, end: Any) -> float:
        """Milliseconds from `start` to `end` (both passed)."""
        if not self.on_gpu:
            return (end - start) * 1000.0
        return float(start.elapsed_time(end))
