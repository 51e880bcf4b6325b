"""The log protocol (docs/backends/protocol.md): one `__<key>__=<json>` line per fact on stdout."""

from __future__ import annotations

import datetime as _dt
import json
import sys

import numpy as np


def emit(key: str, value: object) -> None:
    """Print one protocol line and flush, so a killed process keeps what it printed."""
    sys.stdout.write(f"__{key}__={json.dumps(value)}\n")
    sys.stdout.flush()


def say(message: str) -> None:
    """An informational line (not a protocol key): what the run was set up with."""
    sys.stdout.write(f"[mxnet_benchmarks] {message}\n")
    sys.stdout.flush()


def now_iso() -> str:
    """The current time, ISO-8601 with the UTC offset."""
    # timezone.utc, not datetime.UTC: containers may run a Python older than 3.11.
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")  # noqa: UP017


def timing_results(times_ms: list[float], instances_per_batch: int) -> dict[str, object]:
    """The `results.*` timing keys for the timed batches (milliseconds).

    `instances_per_batch` is the effective batch of the whole job (all devices, all
    workers), so throughput is per job, not per device.
    """
    samples = np.asarray(times_ms, dtype=np.float64)
    mean = float(samples.mean())
    return {
        "results.time": mean,
        "results.time_std": float(samples.std(ddof=1)) if samples.size > 1 else 0.0,
        "results.time_median": float(np.percentile(samples, 50)),
        "results.time_p90": float(np.percentile(samples, 90)),
        "results.time_p95": float(np.percentile(samples, 95)),
        "results.time_p99": float(np.percentile(samples, 99)),
        "results.time_data": [float(t) for t in samples],
        "results.throughput": instances_per_batch * 1000.0 / mean,
    }


def failure(message: str) -> None:
    """Print the failure status with its reason (the caller exits non-zero)."""
    emit("results.status", "failure")
    emit("results.status_msg", message)
    emit("results.end_time", now_iso())
