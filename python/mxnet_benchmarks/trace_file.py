"""The Chrome trace the traced pass writes (docs/tracing.md "The trace file"); stdlib only.

`merge_events` joins the spans the traced pass timed itself (steps, phases, Gluon blocks)
with what `mx.profiler` dumped (operators, memory counters): MXNet's "B"/"E" pairs become
complete ("X") events, its asynchronous "b"/"e" copies of them go, and its 64-bit process
and thread ids become small numbers (Perfetto reads ids as signed 64-bit integers). Both
clocks are the same: MXNet stamps events with microseconds since the epoch, as
`time.time_ns() / 1000` does. `nest_spans` then gives every span what the views read from
its `args`: its `batch`, and a block span its `parent` and `depth`. `write_trace` writes the
file: gzip-compressed, the `dlbs` metadata first, to a temporary file renamed over the target.
"""

from __future__ import annotations

from typing import Any

from benchmark_common.chrome_trace import (  # noqa: F401 - the writer and the nesting
    LAYER,
    PHASE,
    STEP,
    Event,
    nest_spans,
    write_trace,
)

#: Ids above this are MXNet's hashes, renumbered.
_LARGEST_ID = 2**31 - 1



def merge_events(spans: list[Event], profiled: list[Event]) -> list[Event]:
    """The traced pass's spans and MXNet's events as one list of complete events."""
    events: list[Event] = []
    ids: dict[Any, int] = {}
    open_events: dict[tuple[Any, Any], list[Event]] = {}
    for event in profiled:
        phase = event.get("ph")
        if phase in ("b", "e"):
            continue  # MXNet's asynchronous duplicates of its B/E operator events
        for key in ("pid", "tid"):
            if isinstance(event.get(key), int) and event[key] > _LARGEST_ID:
                event[key] = ids.setdefault(event[key], len(ids) + 1000)
        if phase == "B":
            open_events.setdefault((event.get("pid"), event.get("tid")), []).append(event)
        elif phase == "E":
            stack = open_events.get((event.get("pid"), event.get("tid")))
            if stack:
                begin = stack.pop()
                complete = {key: value for key, value in begin.items() if key != "ph"}
                complete["ph"] = "X"
                complete["dur"] = max(0, event["ts"] - begin["ts"])
                events.append(complete)
        else:
            events.append(event)
    events.extend(spans)
    return events
