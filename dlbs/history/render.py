"""History and its verdicts as tables: text for a terminal, CSV and JSON for machines.

Text rounds to four significant digits as reports do (report/numbers.py); CSV and JSON carry
the stored values exactly (a point is one attempt's value, never an average). Every table
says which run it judged: the newest point's tag, when it ended and, where the points come
from more than one host, the host.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from dlbs.history.check import FAILED, Verdict
from dlbs.history.series import Attempted, History
from dlbs.report.keys import title
from dlbs.report.metrics import metric
from dlbs.report.numbers import significant as report_significant
from dlbs.report.select import as_text
from dlbs.results.output import rows_to_csv
from dlbs.util import exact_json

FORMATS = ("text", "csv", "json")
# Values shown per configuration in the text table (the newest last).
SHOWN_VALUES = 6


def significant(value: float | None) -> str:
    """A number for people, as reports write it; `-` for none, `inf` for infinities."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return report_significant(float(value))


def percent(fraction: float | None) -> str:
    """A signed change in percent."""
    if fraction is None:
        return "-"
    if math.isinf(fraction):
        return "+inf%" if fraction > 0 else "-inf%"
    return f"{fraction * 100:+.1f}%"


def when(epoch: float) -> str:
    """An attempt's end as ISO-8601 UTC (seconds)."""
    try:
        return datetime.fromtimestamp(float(epoch), UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):   # beyond the calendar: a clock gone wrong
        return repr(float(epoch))


def statistic(history: History) -> str:
    """What the values are, for a header: `results.time_median (median batch time, ms)`."""
    found = metric(history.metric)
    return f"{history.metric} ({found.title})"


def many_hosts(history: History) -> bool:
    """Whether the points come from more than one host (then tables name each point's)."""
    if history.attempts is None or not history.point_count:
        return False
    from dlbs.history.series import HOST_KEY
    from dlbs.report.identity import column_of

    codes = column_of(history.attempts, HOST_KEY).codes[history.rows]
    return bool((codes != codes[0]).any())


def series_table(history: History) -> tuple[list[str], list[list[str]]]:
    """One row per configuration: its keys, its points, the newest values (text)."""
    headers = [*(title(key) for key in history.keys), "runs", "first", "latest tag",
               f"{metric(history.metric).title}, oldest to newest"]
    rows = []
    for series in history.series:
        values = " ".join(significant(float(v)) for v in series.values[-SHOWN_VALUES:])
        if len(series.values) > SHOWN_VALUES:
            values = "... " + values
        rows.append([*(as_text(value) for value in series.shown), str(len(series.values)),
                     when(series.ended[0]), as_text(series.tags[-1]), values])
    return headers, rows


def verdict_table(history: History,
                  verdicts: Sequence[Verdict]) -> tuple[list[str], list[list[str]]]:
    """One row per configuration: its window, the run judged and its value, the verdict.

    A failed configuration's judged run is its newest, which has no value.
    """
    hosts = many_hosts(history)
    headers = [*(title(key) for key in history.keys), "window", "window mean", "latest",
               "latest tag", "ended", *(["host"] if hosts else []), "change", "z", "verdict"]
    rows = []
    for item in verdicts:
        judged = judged_run(item)
        rows.append([*(as_text(value) for value in item.series.shown), str(item.window),
                     significant(item.mean),
                     "-" if item.status == FAILED else significant(item.latest),
                     as_text(judged.tag), when(judged.ended)[:16].replace("T", " "),
                     *([as_text(judged.host)] if hosts else []), percent(item.change),
                     significant(item.z), item.status])
    return headers, rows


def judged_run(item: Verdict) -> Attempted:
    """The run a verdict judged: the newest point, or the newest run that has none."""
    series = item.series
    if series.problem is not None:
        return series.problem
    return Attempted(series.exp_ids[-1], series.tags[-1],
                     series.hosts[-1] if series.hosts else None, float(series.ended[-1]),
                     "ok", "")


def problem_lines(history: History, verdicts: Sequence[Verdict]) -> list[str]:
    """A line per failed configuration (its newest run and why it has no value)."""
    lines = []
    for item in verdicts:
        if item.series.problem is None:
            continue
        problem = item.series.problem
        keys = ", ".join(f"{title(key)} {as_text(value)}"
                         for key, value in zip(history.keys, item.series.shown))
        lines.append(f"failed: {keys or problem.exp_id}: its newest run "
                     f"{as_text(problem.tag)} (exp.id {problem.exp_id}"
                     f"{'' if problem.host is None else ', host ' + as_text(problem.host)}, "
                     f"ended {when(problem.ended)}): {problem.reason}")
    return lines


def left_out_lines(history: History, limit: int = 5) -> list[str]:
    """What the history left out, for a warning: attempts dated in the future, bad values."""
    lines = []
    if history.future:
        shown = "; ".join(f"{item.exp_id} (tag {as_text(item.tag)}, host "
                          f"{as_text(item.host)}, ended {when(item.ended)})"
                          for item in history.future[:limit])
        more = f" and {len(history.future) - limit} more" if len(history.future) > limit else ""
        lines.append(f"{len(history.future)} attempt(s) dated in the future were left out "
                     f"(their host's clock is wrong; where they belong is unknown): "
                     f"{shown}{more}")
    if history.invalid:
        lines.append(f"{history.invalid} ok attempt(s) with a {history.metric} below zero "
                     "were left out (no valid value)")
    return lines


def text(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Aligned columns under a rule."""
    widths = [max([len(header), *(len(row[i]) for row in rows)])
              for i, header in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines) + "\n"


def points_csv(history: History) -> str:
    """Every point, one line each: the configuration's keys, exp.id, tag, host, end, value."""
    return rows_to_csv(
        [*history.keys, "exp.id", "runtime.run_tag", "env.host", "ended_at", history.metric],
        ([*(as_text(v) for v in series.shown), exp_id, as_text(tag), as_text(host),
          when(ended), float(value)]
         for series in history.series
         for exp_id, tag, host, ended, value in zip(series.exp_ids, series.tags, series.hosts,
                                                    series.ended, series.values)))


def as_json(history: History, verdicts: Sequence[Verdict] | None = None) -> str:
    """The history (and verdicts) as one JSON document."""
    by_series = {id(item.series): item for item in verdicts or ()}
    document: dict[str, Any] = {"format": "dlbs-history", "version": 2,
                                "metric": history.metric, "keys": history.keys,
                                "configurations": [],
                                "future": [_attempted(item) for item in history.future]}
    for series in history.series:
        entry: dict[str, Any] = {
            "keys": dict(zip(history.keys, series.shown)),
            "points": [{"exp.id": exp_id, "runtime.run_tag": tag, "env.host": host,
                        "ended_at": when(ended), "value": float(value)}
                       for exp_id, tag, host, ended, value in zip(
                           series.exp_ids, series.tags, series.hosts, series.ended,
                           series.values)]}
        if series.problem is not None:
            entry["newest_run"] = _attempted(series.problem)
        verdict = by_series.get(id(series))
        if verdict is not None:
            entry["check"] = {"status": verdict.status, "window": verdict.window,
                              "window_mean": verdict.mean, "window_std": verdict.std,
                              "latest": None if verdict.status == FAILED else verdict.latest,
                              "change": verdict.change, "z": verdict.z,
                              "judged": _attempted(judged_run(verdict))}
        document["configurations"].append(entry)
    return exact_json.dumps(document, indent=True) + "\n"


def _attempted(item: Attempted) -> dict[str, Any]:
    return {"exp.id": item.exp_id, "runtime.run_tag": item.tag, "env.host": item.host,
            "ended_at": when(item.ended), "status": item.status,
            **({"reason": item.reason} if item.reason else {})}
