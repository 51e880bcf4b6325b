"""What a scheduler job's node monitors wrote, turned into an attempt's environment and results.

Each node of a job writes `__job.environment.<node>__` and, with `monitor.frequency`,
`__job.monitor.<node>__` (`dlbs.monitor.node`) into a file beside the log, which the job
script appends to the log when the benchmark ends. A job that was killed first leaves the
files: `absorb_node_files` appends them to the log then, so the log always holds them.

From those lines come, as on the other targets:
- the environment: one node's as it is; several nodes' as the first node's (sorted by
  name), with `host` listing every host, plus `nodes`: each node's own;
- `results.use.<series>` on the attempt's clock (seconds since the attempt started, like
  the local monitor's, so that the timed interval falls in place); several nodes add
  `results.use.nodes` (each node's series) and the summary series: cpu, rss, gpu_mem and
  gpu_power summed over the nodes, gpu_util their mean, sampled on the first node's clock
  (a node without a sample within half a period there gives null);
- `results.use.warnings`, each prefixed with its node when there are several.
"""

from __future__ import annotations

import bisect
import math
import os
from collections.abc import Mapping
from typing import Any

from dlbs.monitor.node import ENVIRONMENT_KEY, MONITOR_KEY, NODE_FILE_SUFFIX
from dlbs.monitor.sampling import ENERGY_UNAVAILABLE
from dlbs.run.logs import append_to_log

SUMMED = ("cpu", "rss", "gpu_mem", "gpu_power")
AVERAGED = ("gpu_util",)


def node_files(log_path: str) -> list[str]:
    """The node monitor files of a log (`<log>.<node>.dlbs-node`) that exist now."""
    folder, name = os.path.split(os.path.abspath(log_path))
    try:
        entries = os.listdir(folder)
    except OSError:
        return []
    return sorted(os.path.join(folder, entry) for entry in entries
                  if entry.startswith(name + ".") and entry.endswith(NODE_FILE_SUFFIX))


def absorb_node_files(log_path: str) -> None:
    """Append the node monitor files that a killed job left to its log, and remove them."""
    for path in node_files(log_path):
        try:
            with open(path, "rb") as node_file:
                content = node_file.read()
            if content and not content.endswith(b"\n"):
                content += b"\n"  # a monitor killed mid-line: keep the lines apart
            with append_to_log(log_path) as log:
                log.write(content)
            os.remove(path)
        except OSError:
            continue  # best effort: a file we cannot read loses its node's data, nothing else


def split_node_values(printed: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any],
                                                           dict[str, Any]]:
    """(the printed values without the node lines, environments by node, monitors by node)."""
    rest: dict[str, Any] = {}
    environments: dict[str, Any] = {}
    monitors: dict[str, Any] = {}
    for key, value in printed.items():
        if key.startswith(ENVIRONMENT_KEY + ".") and isinstance(value, dict):
            environments[key[len(ENVIRONMENT_KEY) + 1:]] = value
        elif key.startswith(MONITOR_KEY + ".") and isinstance(value, dict):
            monitors[key[len(MONITOR_KEY) + 1:]] = value
        else:
            rest[key] = value
    return rest, environments, monitors


def job_environment(environments: Mapping[str, Any],
                    local: Mapping[str, Any]) -> dict[str, Any] | None:
    """The attempt's environment from its nodes', or None when no node told it.

    `local` is the environment of the machine that runs dlbs: its `dlbs_version` is kept
    (the nodes have no dlbs).
    """
    if not environments:
        return None
    names = sorted(environments)
    environment = dict(environments[names[0]])
    if "dlbs_version" in local:
        environment["dlbs_version"] = local["dlbs_version"]
    if len(names) > 1:
        hosts = [str(environments[name].get("host", name)) for name in names]
        environment["host"] = ",".join(dict.fromkeys(hosts))
        environment["nodes"] = {name: environments[name] for name in names}
        environment["node_count"] = len(names)
    return environment


def on_attempt_clock(series: Mapping[str, Any], offset: float) -> dict[str, Any]:
    """A monitor's series with `time` counted from the attempt's start, not the monitor's.

    `offset` is the monitor's start minus the attempt's, seconds (wall clock): a monitor
    starts after its attempt (the process spawned, NVML opened: over a second on a GPU
    machine), and the backend's marks are placed on the attempt's clock (results.usage).
    """
    moved: dict[str, Any] = {key: list(values) if isinstance(values, list) else values
                             for key, values in series.items()}
    times = series.get("time")
    if isinstance(times, list):
        moved["time"] = [t if not isinstance(t, int | float) or isinstance(t, bool)
                         else round(offset + float(t), 4) for t in times]
    return moved


def job_usage(monitors: Mapping[str, Any], attempt_start: float) -> dict[str, Any]:
    """`results.use.*` from the nodes' monitors; `attempt_start` is the epoch of its start."""
    nodes: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    periods = []
    for name in sorted(monitors):
        data = monitors[name]
        series = data.get("series")
        if not isinstance(series, dict) or not isinstance(series.get("time"), list):
            continue
        offset = float(data.get("start") or attempt_start) - attempt_start
        rebased = on_attempt_clock({key: values for key, values in series.items()
                                    if isinstance(values, list)}, offset)
        if isinstance(series.get(ENERGY_UNAVAILABLE), str):  # why there is no energy series
            rebased[ENERGY_UNAVAILABLE] = series[ENERGY_UNAVAILABLE]
        nodes[name] = rebased
        periods.append(float(data.get("frequency") or 0))
        prefix = f"{name}: " if len(monitors) > 1 else ""
        warnings += [prefix + str(w) for w in data.get("warnings") or []]
    results: dict[str, Any] = {}
    if len(nodes) == 1:
        (only,) = nodes.values()
        results.update({f"results.use.{key}": values for key, values in only.items() if values})
    elif nodes:
        results["results.use.nodes"] = nodes
        results.update({f"results.use.{key}": values
                        for key, values in _summary(nodes, max(periods) / 2).items()})
    if warnings:
        results["results.use.warnings"] = warnings
    return results


def _summary(nodes: Mapping[str, Mapping[str, list[Any]]], tolerance: float) -> dict[str, list]:
    """The nodes' series on the first node's clock: sums and means (see the module doc)."""
    names = sorted(nodes)
    clock = nodes[names[0]]["time"]
    keys = [key for key in (*SUMMED, *AVERAGED) if any(key in nodes[n] for n in names)]
    summary: dict[str, list[Any]] = {"time": list(clock)}
    for key in keys:
        summary[key] = []
    for moment in clock:
        values: dict[str, list[float | None]] = {key: [] for key in keys}
        for name in names:
            index = _nearest(nodes[name]["time"], moment, tolerance)
            for key in keys:
                series = nodes[name].get(key)
                value = series[index] if series is not None and index is not None else None
                values[key].append(_number(value))
        for key in keys:
            present = [v for v in values[key] if v is not None]
            if key in SUMMED:
                summary[key].append(round(sum(present), 3) if len(present) == len(names)
                                    else None)
            else:
                summary[key].append(round(sum(present) / len(present), 3) if present else None)
    return summary


def _nearest(times: list[Any], moment: float, tolerance: float) -> int | None:
    """The index of the sample nearest to `moment` (times are sorted), if close enough."""
    right = bisect.bisect_left(times, moment)
    candidates = [i for i in (right - 1, right) if 0 <= i < len(times)]
    if not candidates:
        return None
    best = min(candidates, key=lambda i: abs(float(times[i]) - moment))
    return best if abs(float(times[best]) - moment) <= max(tolerance, 1e-9) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)
