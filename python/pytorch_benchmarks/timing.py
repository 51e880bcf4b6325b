"""The timed loop: every interval ends with the device's work finished."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from benchmark_common.timed_marks import TimedMarks

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass
class Timings:
    """Per-batch wall times and data waits, milliseconds; warm-up kept apart."""

    warmup_ms: list[float] = field(default_factory=list)
    batch_ms: list[float] = field(default_factory=list)
    data_wait_ms: list[float] = field(default_factory=list)


def device_synchronizer(device: torch.device) -> Callable[[], None]:
    """A function that returns once all work queued on ``device`` has finished."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None  # CPU operators finish before they return


def run_timed_loop(
    next_batch: Callable[[], Batch],
    step: Callable[[torch.Tensor, torch.Tensor], object],
    sync: Callable[[], None],
    num_warmup: int,
    num_batches: int,
    marks: TimedMarks | None = None,
) -> Timings:
    """Run ``num_warmup`` untimed-for-results and ``num_batches`` timed steps.

    A batch's time runs from the moment the loop asks for its input to the moment the
    device has finished its step, so data waits, host overhead and device time all count,
    and consecutive intervals tile the wall clock with no gaps. The device is synchronized
    before the first timed batch so no warm-up work leaks into it. ``marks`` print the
    timed interval's start and end (the energy's interval, docs/efficiency.md).
    """
    timings = Timings()
    sync()
    for _ in range(num_warmup):
        start = time.perf_counter()
        inputs, labels = next_batch()
        step(inputs, labels)
        sync()
        timings.warmup_ms.append((time.perf_counter() - start) * 1000.0)
    if marks is not None and num_batches:
        marks.start()
    for _ in range(num_batches):
        start = time.perf_counter()
        inputs, labels = next_batch()
        fetched = time.perf_counter()
        step(inputs, labels)
        sync()
        end = time.perf_counter()
        timings.batch_ms.append((end - start) * 1000.0)
        timings.data_wait_ms.append((fetched - start) * 1000.0)
    if marks is not None and num_batches:
        marks.end()
    return timings


def run_event_timed_loop(
    next_batch: Callable[[], Batch],
    step: Callable[[torch.Tensor, torch.Tensor], object],
    device: torch.device,
    num_warmup: int,
    num_batches: int,
    marks: TimedMarks | None = None,
) -> Timings:
    """Like ``run_timed_loop``, but the timed batches are bounded by CUDA events.

    Each batch's interval ends with an event recorded on the device's stream after its step:
    the device stamps it once that step's work has finished. The host never waits between
    timed batches (one synchronize after the last), so the device is never left idle while
    the host launches the next step. If the host is the bottleneck (slow data, launch-bound
    models) the device waits for the host and that idle time falls inside the intervals, so
    the intervals still tile the wall clock from the first timed batch to the last.
    """
    sync = device_synchronizer(device)
    timings = run_timed_loop(next_batch, step, sync, num_warmup, 0)
    timings.batch_ms.clear()
    timings.data_wait_ms.clear()
    begin = torch.cuda.Event(enable_timing=True)
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(num_batches)]
    if marks is not None:
        marks.start()  # the device is idle: the begin event runs when it is recorded
    begin.record()
    for end_event in ends:
        start = time.perf_counter()
        inputs, labels = next_batch()
        timings.data_wait_ms.append((time.perf_counter() - start) * 1000.0)
        step(inputs, labels)
        end_event.record()
    sync()
    if marks is not None:
        marks.end()
    previous = begin
    for end_event in ends:
        timings.batch_ms.append(previous.elapsed_time(end_event))
        previous = end_event
    return timings
