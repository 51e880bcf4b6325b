"""An attempt's final status, from what the target saw and what the backend printed.

What the backend printed is judged by the one rule every reader of a log uses
(`dlbs.results.protocol.judge_status`): its own `results.status`, else ok only with a
positive, finite `results.time` (a DLBS log). An infinite or NaN time is no time at all.
Only the keys a backend owns are taken from its output (`protocol.backend_output`): a model
that prints `__exp.model__="resnet50"` in a resnet18 run does not relabel it; the keys
refused are named in the verdict, for the run to warn about.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dlbs.results.protocol import backend_output, judge_status
from dlbs.run.outcome import Outcome

_OOM = re.compile(r"out of memory|OutOfMemoryError|CUDA error: out of memory|"
                  r"cudaErrorMemoryAllocation|std::bad_alloc", re.IGNORECASE)


@dataclass
class Verdict:
    status: str
    message: str | None
    results: dict[str, Any]
    out_of_memory: bool = False
    #: Keys of the output that were not taken: the planner decides them (see the module).
    refused: list[str] = field(default_factory=list)


def judge(outcome: Outcome, printed: Mapping[str, Any], experiment: Mapping[str, Any],
          cwd: str | None = None) -> Verdict:
    """Combine the target's outcome with the backend's protocol lines.

    `printed` is what the run printed after its log's header (ParsedLog.printed); `cwd`
    where dlbs runs (a relative exp.trace_file is from there). The target's word wins for
    timeouts, interrupts and cancellations; a process that exited non-zero is a failure
    whatever it printed; an exit 0 counts only when what it printed is judged ok (see the
    module doc).
    """
    results, refused = backend_output(printed, experiment, cwd)
    printed_status = results.get("results.status")
    printed_message = results.get("results.status_msg")
    if outcome.status != "ok":
        status = outcome.status
        message = "; ".join(m for m in (outcome.message, _text(printed_message)) if m) or None
    elif judge_status(dict(results))["results.status"] == "ok":
        status, message = "ok", None
    elif printed_status is not None:
        status, message = "failure", _text(printed_message) or f"backend said {printed_status}"
    elif "results.time" in results:
        status = "failure"
        message = f"the backend printed no valid results.time ({results['results.time']!r})"
    else:
        status, message = "failure", "the backend printed no results"
    results.pop("results.status", None)
    results.pop("results.status_msg", None)
    oom = status == "failure" and bool(_OOM.search(message or ""))
    return Verdict(status, message, results, oom, refused)


def _text(value: Any) -> str:
    return "" if value is None else str(value)
