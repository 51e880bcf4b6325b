"""A report as one self-contained HTML page.

Tables, charts, resource use, environment, failures. Nothing on the page is fetched: styles
are in the page and charts are inline SVG (matplotlib, text kept as text), so the file can
be mailed, archived or opened offline. The page is a Jinja2 template
(templates/report.html.j2) with autoescaping; only the SVG that matplotlib wrote is inserted
as markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from dlbs import __version__
from dlbs.errors import ResultsError
from dlbs.report.document import Report
from dlbs.report.identity import ENV_PREFIX, column_of
from dlbs.report.keys import partition, title
from dlbs.report.metrics import MONITOR_COLUMNS, Metric, metric
from dlbs.report.render import cell_note_lines, header_lines, key_text, layout, number
from dlbs.report.select import Experiment, as_text

# Charts of more rows than this would be unreadable; the tables still hold every row.
MAX_CHART_ROWS = 40
# Models named per environment before "...".
MAX_MODELS = 8
# Environment fields shown, in order: (key in the environment, column title).
ENVIRONMENT_FIELDS = (
    ("host", "host"), ("gpu_model", "GPU"), ("gpu_count", "GPUs"), ("gpu_driver", "driver"),
    ("cuda_driver_version", "CUDA (driver)"), ("cpu_model", "CPU"), ("cpu_count", "CPUs"),
    ("os", "OS"), ("python", "Python"), ("dlbs_version", "dlbs"),
)


def render_html(report: Report) -> str:
    """The page (see the module)."""
    from jinja2 import Environment, PackageLoader, select_autoescape
    from markupsafe import Markup

    environment = Environment(loader=PackageLoader("dlbs.report", "templates"),
                              autoescape=select_autoescape(("html", "j2")),
                              trim_blocks=True, lstrip_blocks=True)
    template = environment.get_template("report.html.j2")
    lines = header_lines(report)
    monitor = _monitor_table(report)
    headers, environments = _environments(report)
    charts, chart_note = _charts(report)
    return template.render(
        heading=report.heading,
        version=__version__,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        counted=report.counted,
        constants=lines[1:],
        grids=layout(report),
        charts=[{"svg": Markup(svg), "caption": caption} for svg, caption in charts],
        chart_note=chart_note,
        monitor_headers=monitor[0], monitor_rows=monitor[1], monitor_keys=len(report.row_keys),
        environment_headers=headers, environments=environments,
        failures=[_failure(experiment) for experiment in report.failures],
        notes=cell_note_lines(report) + report.footnotes(),
        statistics=statistics_notes(report),
    ) + "\n"


# Where the values of a report come from, by the keys it shows (docs/reports.md).
BATCH_STATISTICS = ("Batch times and throughput: dlbs computes them from the per-batch times "
                    "of every backend alike; the standard deviation uses ddof=1 "
                    "(docs/reports.md).")
LOADGEN_STATISTICS = ("Latencies and query rates: LoadGen's own measurements, as its summary "
                      "reports them (docs/evaluation.md); never combined across runs.")


def statistics_notes(report: Report) -> list[str]:
    """What the values shown are: batch-time statistics, LoadGen's measurements, or both."""
    keys = [item.key for item in report.metrics]
    notes = []
    if any(key.startswith(("results.time", "results.throughput", "results.warmup"))
           or key in ("speedup", "efficiency", "throughput_median", "results.data_wait")
           for key in keys):
        notes.append(BATCH_STATISTICS)
    if any(key.startswith(("results.latency_", "results.qps", "results.target_qps",
                           "results.max_qps")) for key in keys):
        notes.append(LOADGEN_STATISTICS)
    return notes


def _charts(report: Report) -> tuple[list[tuple[str, str]], str | None]:
    """Each chart the report has (its kind's: plot.REPORT_CHARTS), or why it has none.

    The charts as (inline SVG, caption).
    """
    if report.table_cells is None:
        return [], None
    if report.table_cells.rows > MAX_CHART_ROWS:
        return [], f"no chart: {report.table_cells.rows} rows (at most {MAX_CHART_ROWS})"
    from dlbs.report import plot

    try:
        figure, caption = plot.report_chart(report)
    except ResultsError as error:  # nothing it can draw (one GPU count, no power)
        return [], f"no chart: {error.message}" + (f" ({error.hint})" if error.hint else "")
    return [(_svg(figure, 0), caption)], None


def _svg(figure: Any, index: int) -> str:
    """The figure as an inline <svg> element: no XML prologue, ids unique to the chart."""
    from dlbs.report.plot import inline_svg

    return inline_svg(figure, f"dlbs-chart-{index}")


def _monitor_table(report: Report) -> tuple[list[str], list[list[str]]]:
    """Row keys and the monitor's summaries of each cell, when any cell has them."""
    cells = report.table_cells
    if cells is None:
        return [], []
    metrics: list[Metric] = [metric(key) for key in MONITOR_COLUMNS]
    values = [report.cell_values(item.key) for item in metrics]
    order = report.displayed().tolist()
    # Within a row, by the column's text (as the page has always listed them).
    order.sort(key=lambda cell: (int(cells.row[cell]), as_text(
        None if cells.column is None else cells.column[cell])))
    rows = []
    for cell in order:
        found = [value.get(cell) for value in values]
        if all(value is None for value in found):
            continue
        keys = [key_text(value) for value in cells.shown[cells.row[cell]]]
        if report.column_key is not None and cells.column is not None:
            keys.append(key_text(cells.column[cell]))
        rows.append(keys + [number(value) for value in found])
    if not rows:
        return [], []
    headers = [title(key) for key in report.row_keys]
    if report.column_key is not None:
        headers.append(report.column_title)
    return headers + [item.title for item in metrics], rows


def _environments(report: Report) -> tuple[list[str], list[dict[str, Any]]]:
    """Distinct environments of the measured attempts, with framework versions and counts.

    Environments are told apart by what the table shows (ENVIRONMENT_FIELDS), not by what it
    does not (the date of each sweep): no two rows read alike.
    """
    headers = ["models"] + [name for _, name in ENVIRONMENT_FIELDS] + ["framework"]
    cells = report.table_cells
    if cells is None:
        return headers, []
    selection = cells.selection
    attempts, members = selection.attempts, selection.members
    names = [key for key in attempts.keys() if key.startswith(ENV_PREFIX)]
    if not names or not len(members):
        return headers, []
    recorded = np.zeros(len(members), dtype=bool)
    for key in names:
        recorded |= attempts.present(key)[members]
    shown = [f"{ENV_PREFIX}{key}" for key, _ in ENVIRONMENT_FIELDS]
    groups, _ = partition(len(members), shown, lambda key: column_of(attempts, key).codes[
        members])
    cell_of = np.repeat(np.arange(len(selection.measured)), np.diff(selection.member_starts))
    models, versions = column_of(attempts, "exp.model"), column_of(attempts, "exp.framework_ver")
    found: list[dict[str, Any]] = []
    # Environments in the order their first attempt was read.
    distinct, first = np.unique(groups[recorded], return_index=True)
    for group in distinct[np.argsort(first, kind="stable")].tolist():
        mine = members[recorded & (groups == group)]
        cells = cell_of[recorded & (groups == group)]
        environment = {key[len(ENV_PREFIX):]: column_of(attempts, key).values[
            column_of(attempts, key).codes[mine[0]]] for key in shown}
        found.append({
            "environment": environment, "experiments": len(np.unique(cells)),
            "models": {as_text(models.values[code])
                       for code in np.unique(models.codes[mine]).tolist()},
            "frameworks": {str(versions.values[code]) for code in
                           np.unique(versions.codes[mine]).tolist() if versions.values[code]}})
    rows = []
    for entry in found:
        environment = entry["environment"]
        shown_models = sorted(entry["models"])
        shown = ", ".join(shown_models[:MAX_MODELS]) + (
            ", ..." if len(shown_models) > MAX_MODELS else "")
        values = [shown] + [as_text(environment.get(key)) or "-"
                            for key, _ in ENVIRONMENT_FIELDS]
        values.append(", ".join(sorted(entry["frameworks"])) or "-")
        rows.append({"count": entry["experiments"], "cells": values})
    return headers, rows


def _failure(experiment: Experiment) -> dict[str, str]:
    latest = experiment.latest.experiment
    what = ", ".join(key_text(latest.get(key)) for key in _WHAT if latest.get(key) is not None)
    return {
        "exp_id": as_text(latest.get("exp.id")) or "-",
        "what": what or "-",
        "status": as_text(latest.get("results.status")),
        "reason": as_text(latest.get("results.status_msg")) or "-",
        "log": as_text(latest.get("results.log_file")) or "-",
    }


_WHAT: Sequence[str] = ("exp.framework", "exp.model", "exp.phase", "exp.dtype",
                        "exp.num_gpus", "exp.replica_batch")
