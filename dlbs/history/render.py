"""History and its verdicts as tables: text for a terminal, CSV and JSON for machines.

Text rounds to four significant digits; CSV and JSON carry the stored values exactly (a
point is one attempt's value, never an average).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from dlbs.history.check import Verdict
from dlbs.history.series import History
from dlbs.report.keys import title
from dlbs.report.metrics import metric
from dlbs.report.select import as_text
from dlbs.results.output import rows_to_csv
from dlbs.util import exact_json

FORMATS = ("text", "csv", "json")
# Values shown per configuration in the text table (the newest last).
SHOWN_VALUES = 6


def significant(value: float | None, digits: int = 4) -> str:
    """A number for people: `digits` significant digits; `-` for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}g}"


def percent(fraction: float | None) -> str:
    """A signed change in percent."""
    if fraction is None:
        return "-"
    if math.isinf(fraction):
        return "+inf%" if fraction > 0 else "-inf%"
    return f"{fraction * 100:+.1f}%"


def when(epoch: float) -> str:
    """An attempt's end as ISO-8601 UTC (seconds)."""
    return datetime.fromtimestamp(float(epoch), UTC).isoformat(timespec="seconds")


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
    """One row per configuration: its window, its newest value, the change, z, the verdict."""
    headers = [*(title(key) for key in history.keys), "window", "window mean", "latest",
               "latest tag", "change", "z", "verdict"]
    rows = [[*(as_text(value) for value in item.series.shown), str(item.window),
             significant(item.mean), significant(item.latest), as_text(item.series.tags[-1]),
             percent(item.change), significant(item.z, 3), item.status]
            for item in verdicts]
    return headers, rows


def text(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Aligned columns under a rule."""
    widths = [max([len(header), *(len(row[i]) for row in rows)])
              for i, header in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines) + "\n"


def points_csv(history: History) -> str:
    """Every point, one line each: the configuration's keys, exp.id, tag, end, the value."""
    return rows_to_csv(
        [*history.keys, "exp.id", "runtime.run_tag", "ended_at", history.metric],
        ([*(as_text(v) for v in series.shown), exp_id, as_text(tag), when(ended),
          float(value)]
         for series in history.series
         for exp_id, tag, ended, value in zip(series.exp_ids, series.tags, series.ended,
                                              series.values)))


def as_json(history: History, verdicts: Sequence[Verdict] | None = None) -> str:
    """The history (and verdicts) as one JSON document."""
    by_series = {id(item.series): item for item in verdicts or ()}
    document: dict[str, Any] = {"format": "dlbs-history", "version": 1,
                                "metric": history.metric, "keys": history.keys,
                                "configurations": []}
    for series in history.series:
        entry: dict[str, Any] = {
            "keys": dict(zip(history.keys, series.shown)),
            "points": [{"exp.id": exp_id, "runtime.run_tag": tag, "ended_at": when(ended),
                        "value": float(value)}
                       for exp_id, tag, ended, value in zip(series.exp_ids, series.tags,
                                                            series.ended, series.values)]}
        verdict = by_series.get(id(series))
        if verdict is not None:
            entry["check"] = {"status": verdict.status, "window": verdict.window,
                              "window_mean": verdict.mean, "window_std": verdict.std,
                              "latest": verdict.latest, "change": verdict.change,
                              "z": verdict.z}
        document["configurations"].append(entry)
    return exact_json.dumps(document, indent=True) + "\n"
