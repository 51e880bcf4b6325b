"""An attempt's final status, from what the target saw and what the backend printed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlbs.run.outcome import Outcome

_OOM = re.compile(r"out of memory|OutOfMemoryError|CUDA error: out of memory|"
                  r"cudaErrorMemoryAllocation|std::bad_alloc", re.IGNORECASE)


@dataclass
class Verdict:
    status: str
    message: str | None
    results: dict[str, Any]
    out_of_memory: bool = False


def judge(outcome: Outcome, printed: Mapping[str, Any], experiment: Mapping[str, Any]) -> Verdict:
    """Combine the target's outcome with the backend's protocol lines.

    The target's word wins for timeouts, interrupts and cancellations; a process that
    exited non-zero is a failure whatever it printed; an exit 0 counts only with a
    `results.status` of ok, or (DLBS logs) a positive `results.time`.
    """
    results = {key: value for key, value in printed.items()
               if key.startswith("results.") or experiment.get(key) != value}
    printed_status = printed.get("results.status")
    printed_message = printed.get("results.status_msg")
    if outcome.status != "ok":
        status = outcome.status
        message = "; ".join(m for m in (outcome.message, _text(printed_message)) if m) or None
    elif printed_status is not None and printed_status != "ok":
        status, message = "failure", _text(printed_message) or f"backend said {printed_status}"
    elif printed_status is None and not _positive(printed.get("results.time")):
        status, message = "failure", "the backend printed no results"
    else:
        status, message = "ok", None
    results.pop("results.status", None)
    results.pop("results.status_msg", None)
    oom = status == "failure" and bool(_OOM.search(message or ""))
    return Verdict(status, message, results, oom)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0
