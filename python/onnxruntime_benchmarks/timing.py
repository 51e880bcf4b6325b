"""The timed loop: warm-up batches apart, then one interval per timed batch.

A batch's interval runs from the call of the step to its return; the step returns once the
batch's outputs are complete (session.py), so consecutive intervals tile the wall clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmark_common.timed_marks import TimedMarks


@dataclass
class Timings:
    """Per-batch wall times in milliseconds, warm-up kept apart."""

    warmup_ms: list[float] = field(default_factory=list)
    batch_ms: list[float] = field(default_factory=list)


def run_timed_loop(step: Callable[[], object], num_warmup: int, num_batches: int,
                   marks: TimedMarks | None = None) -> Timings:
    """Run `num_warmup` untimed-for-results steps, then `num_batches` timed ones.

    `marks` print the timed interval's start and end (docs/efficiency.md).
    """
    timings = Timings()
    for _ in range(num_warmup):
        start = time.perf_counter()
        step()
        timings.warmup_ms.append((time.perf_counter() - start) * 1000.0)
    if marks is not None:
        marks.start()
    for _ in range(num_batches):
        start = time.perf_counter()
        step()
        timings.batch_ms.append((time.perf_counter() - start) * 1000.0)
    if marks is not None:
        marks.end()
    return timings
