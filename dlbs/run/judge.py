"""An attempt's final status, from what the target saw and what the backend printed.

What the backend printed is judged by the one rule every reader of a log uses
(`dlbs.results.protocol.judge_status`): its own `results.status`, else ok only with a
positive, finite `results.time` (a DLBS log). An infinite or NaN time is no time at all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlbs.results.protocol import judge_status
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
    exited non-zero is a failure whatever it printed; an exit 0 counts only when what it
    printed is judged ok (see the module doc).
    """
    results = {key: value for key, value in printed.items()
               if key.startswith("results.") or experiment.get(key) != value}
    printed_status = printed.get("results.status")
    printed_message = printed.get("results.status_msg")
    if outcome.status != "ok":
        status = outcome.status
        message = "; ".join(m for m in (outcome.message, _text(printed_message)) if m) or None
    elif judge_status(dict(printed))["results.status"] == "ok":
        status, message = "ok", None
    elif printed_status is not None:
        status, message = "failure", _text(printed_message) or f"backend said {printed_status}"
    elif "results.time" in printed:
        status = "failure"
        message = f"the backend printed no valid results.time ({printed['results.time']!r})"
    else:
        status, message = "failure", "the backend printed no results"
    results.pop("results.status", None)
    results.pop("results.status_msg", None)
    oom = status == "failure" and bool(_OOM.search(message or ""))
    return Verdict(status, message, results, oom)


def _text(value: Any) -> str:
    return "" if value is None else str(value)
