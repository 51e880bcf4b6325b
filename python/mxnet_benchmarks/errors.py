"""The one exception type for bad input to the backend (unknown model, kvstore, dtype, ...)."""

from __future__ import annotations


class BenchmarkError(Exception):
    """A user error: reported as `results.status="failure"` with this message, exit 2.

    Everything else that escapes (an MXNet error, out of memory) is reported the same way
    with exit 1, so a log never shows a throughput that looks valid after a failure.
    """

    exit_status = 2
