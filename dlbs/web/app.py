"""The pages of `dlbs serve` (Starlette): runs, report, compare, history, experiments.

Every page reads the store through data.py: read-only, requests answered at once (each in a
worker thread, over a connection of its own), and a page that shows the store alone kept
until the store changes. What a request says (a report type, `--by` keys, filters, two run
tags, an experiment id) goes to the same functions `dlbs report`, `compare` and `history`
call, never into SQL; every value on a page is escaped by the templates (autoescape), and
only SVG that matplotlib drew and the report page that dlbs/report rendered are inserted as
markup. The Content-Security-Policy header forbids the browser to fetch anything: no
script, no outside style, image or font.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import urllib.parse
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from dlbs.errors import DlbsError
from dlbs.history import build_history, check
from dlbs.history import render as history_render
from dlbs.report import REPORT_TYPES, Options, build_report, render
from dlbs.report.render import header_lines, layout
from dlbs.report.select import Filter, as_text, matching
from dlbs.results.attempt_files import NotShown, attempt_log, attempt_trace
from dlbs.results.columns import Record
from dlbs.results.store import is_store_url
from dlbs.util.credentials import mask_text
from dlbs.web import charts
from dlbs.web.data import Reader, StoreData

# The browser fetches nothing but the page: styles are inline, charts inline SVG.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "img-src data:; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
# Rows of the experiments page, and bytes of a log shown (its end).
MAX_ROWS = 500
# A report of more rows shows its first rows (and the whole table as CSV).
PAGE_ROWS = 1000
LOG_TAIL_BYTES = 256 * 1024
_SHOWN_COLUMNS = ("exp.model", "exp.replica_batch", "exp.num_gpus", "exp.dtype",
                  "results.status", "results.time_median", "results.throughput")


def create_app(location: str) -> Starlette:
    """The application over the store at `location` (opened now, read-only)."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    store = StoreData(location)
    # Where an SQLite store's run folders may be now: a folder copied with its logs.
    store_folder = None if is_store_url(location) else \
        os.path.dirname(os.path.abspath(location))
    templates = Environment(loader=PackageLoader("dlbs.web", "templates"),
                            autoescape=select_autoescape(("html", "j2")),
                            trim_blocks=True, lstrip_blocks=True)

    def page(name: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = templates.get_template(name).render(store=store.name, **values)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def handler(build: Callable[[Request, Reader], Response], *,
                store_only: bool = True) -> Callable[[Request], Response]:
        """A page; `store_only`: it shows the store alone (no file), kept per version."""
        def respond(request: Request) -> Response:
            with store.reading() as reader:
                try:
                    if not store_only:
                        return build(request, reader)
                    key = (reader.version(), request.url.path,
                           tuple(sorted(request.query_params.multi_items())))
                    return _copy(store.pages.get(key, lambda: _sized(build(request, reader))))
                except DlbsError as error:
                    # Messages name stores without passwords; a URL someone typed too.
                    return page("error.html.j2", 400, heading="Cannot show this",
                                message=mask_text(error.message),
                                hint=mask_text(error.hint or "") or None)
        return respond

    def runs(request: Request, data: Reader) -> Response:
        return page("runs.html.j2", heading="Runs", runs=data.runs())

    def experiments(request: Request, data: Reader) -> Response:
        attempts = data.attempts()
        tag = request.query_params.get("tag")
        filters = [Filter("runtime.run_tag", tag)] if tag else []
        rows = np.flatnonzero(matching(attempts, filters)) if filters else \
            np.arange(attempts.size)
        columns = [attempts.column(key) for key in ("exp.id", *_SHOWN_COLUMNS)]
        shown = [[as_text(column.values[column.codes[row]]) for column in columns]
                 for row in rows[:MAX_ROWS].tolist()]
        return page("experiments.html.j2", heading="Experiments", tag=tag, rows=shown,
                    headers=["exp.id", *_SHOWN_COLUMNS], shown=len(shown), total=len(rows))

    def report(request: Request, data: Reader) -> Response:
        from dlbs.report.html import render_html

        query = request.query_params
        kind = query.get("type") or "regular"
        if kind not in REPORT_TYPES:
            raise DlbsError(f"unknown report type {kind!r}; expected one of "
                            f"{', '.join(REPORT_TYPES)}")
        fmt = query.get("format") or "html"
        if fmt not in ("html", "csv"):
            raise DlbsError(f"unknown format {fmt!r}; expected html or csv")
        filters = [Filter.parse(text) for text in query.getlist("filter") if text]
        options = Options(kind=kind, by=_split(query.get("by")), filters=filters,
                          columns=_split(query.get("columns")),
                          latest=query.get("latest") in ("1", "on", "true"),
                          rows=_split(query.get("rows")), cols=query.get("cols") or None,
                          value=query.get("value") or None)
        report = build_report(data.attempts(), options)
        if fmt == "csv":   # the whole table, as `dlbs report --format csv` writes it
            return Response(render(report, "csv"), media_type="text/csv", headers={
                **SECURITY_HEADERS, "Content-Disposition": 'attachment; filename="report.csv"'})
        form = dict(types=REPORT_TYPES, kind=kind, by=query.get("by") or "",
                    filters=[f"{item.key}={item.pattern}" for item in filters] or [""],
                    columns=query.get("columns") or "", latest=options.latest)
        rows = report.table_cells.rows if report.table_cells is not None else 0
        if rows > PAGE_ROWS:
            # dlbs report's page of every row would be megabytes: the first rows, and the
            # whole table as CSV (the same engine, the same values).
            grids = [(grid.title, grid.headers, grid.numeric, grid.rows[:PAGE_ROWS])
                     for grid in layout(report)]
            return page("report_rows.html.j2", heading=report.heading, form=form,
                        lines=header_lines(report), grids=grids, rows=rows, shown=PAGE_ROWS,
                        notes=report.footnotes(),
                        csv_query=urllib.parse.urlencode([*query.multi_items(),
                                                          ("format", "csv")]))
        header = templates.get_template("report_nav.html.j2").render(store=data.name, form=form)
        return HTMLResponse(render_html(report).replace("<body>", "<body>\n" + header, 1),
                            headers=SECURITY_HEADERS)

    def compare(request: Request, data: Reader) -> Response:
        from dlbs.report.compare import compare as compare_sets
        from dlbs.report.render_compare import render_comparison, summary_line

        tags = data.tags()
        base = request.query_params.get("base") or (tags[1] if len(tags) > 1 else None)
        new = request.query_params.get("new") or (tags[0] if tags else None)
        values: dict[str, Any] = {"tags": tags, "base": base, "new": new, "text": None}
        if base and new:
            attempts = data.attempts()
            sides = [attempts.take(np.flatnonzero(matching(
                attempts, [Filter("runtime.run_tag", _glob_literal(tag))])))
                for tag in (base, new)]
            comparison = compare_sets(sides[0], sides[1])
            # `dlbs compare --format csv`, shown as a table: the same values, unrounded.
            table = list(csv.reader(io.StringIO(render_comparison(comparison, "csv"))))
            values.update(text=True, headers=table[0] if table else [], rows=table[1:],
                          summary=summary_line(comparison))
        return page("compare.html.j2", heading="Compare two runs", **values)

    def history(request: Request, data: Reader) -> Response:
        query = _history_query(request)
        found, verdicts, min_change = _history(data, query)
        headers, rows = history_render.verdict_table(found, verdicts)
        linked = [{"cells": cells, "query": urllib.parse.urlencode({**query, "index": index})}
                  for index, cells in enumerate(rows)]
        regressions = sum(1 for item in verdicts if item.status == "regression")
        summary = (f"{len(verdicts)} configuration(s), {regressions} regression(s); window "
                   f"{query['window']}, z {query['z']}, min change {min_change:.1%} of "
                   f"{found.metric}")
        return page("history.html.j2", heading="History", query=query, headers=headers,
                    rows=linked, summary=summary)

    def history_chart(request: Request, data: Reader) -> Response:
        query = _history_query(request)
        found, verdicts, _ = _history(data, query)
        try:
            index = int(request.query_params.get("index", ""))
            verdict = verdicts[index]
        except (ValueError, IndexError):
            return page("error.html.j2", 404, heading="No such configuration",
                        message="the history has no configuration of that number")
        series = verdict.series
        description = ", ".join(f"{key} {as_text(value)}"
                                for key, value in zip(found.keys, series.shown))
        points = [{"tag": as_text(tag), "exp_id": exp_id,
                   "ended": history_render.when(ended), "value": repr(float(value))}
                  for tag, exp_id, ended, value in zip(series.tags, series.exp_ids,
                                                       series.ended, series.values)]
        from markupsafe import Markup

        return page("chart.html.j2", heading="History of one configuration",
                    description=description, metric=found.metric, points=points,
                    svg=Markup(charts.history_chart(series, found.metric, verdict.mean)),
                    caption=f"{found.metric} of each run, oldest first; dashed: the mean of "
                            f"the lookback window; verdict: {verdict.status}")

    def experiment(request: Request, data: Reader) -> Response:
        exp_id = request.path_params["exp_id"]
        attempts = data.experiment(exp_id)
        if not attempts:
            return page("error.html.j2", 404, heading="No such experiment",
                        message=f"the store holds no experiment {exp_id}")
        return page("experiment.html.j2", heading=f"Experiment {exp_id}", attempts=attempts,
                    **_experiment_details(attempts[-1], store_folder))

    routes = [Route("/", handler(runs)), Route("/experiments", handler(experiments)),
              Route("/report", handler(report)), Route("/compare", handler(compare)),
              Route("/history", handler(history)),
              Route("/history/chart", handler(history_chart)),
              # An experiment's page shows its log and trace files, which change on their own.
              Route("/experiment/{exp_id:path}", handler(experiment, store_only=False))]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        store.close()

    return Starlette(routes=routes, lifespan=lifespan)


def _sized(response: Response) -> tuple[int, Response]:
    """A page and its size, for the cache of pages (only a page that was answered is kept)."""
    return (len(response.body) if response.status_code == 200 else 2**62), response


def _copy(response: Response) -> Response:
    """A response of its own for each request (a kept page is answered many times)."""
    return Response(response.body, status_code=response.status_code,
                    headers={k: v for k, v in response.headers.items()
                             if k != "content-length"})


def _split(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [item.strip() for item in text.split(",") if item.strip()] or None


def _glob_literal(text: str) -> str:
    """A glob that matches `text` only (its *, ? and [ taken literally)."""
    return "".join(f"[{char}]" if char in "*?[" else char for char in text)


def _history_query(request: Request) -> dict[str, str]:
    query = request.query_params
    return {"by": query.get("by") or "", "filter": query.get("filter") or "",
            "metric": query.get("metric") or "time_median",
            "window": query.get("window") or "20", "z": query.get("z") or "3",
            "min_change": query.get("min_change") or "5%"}


def _history(data: Reader, query: dict[str, str]) -> tuple[Any, list[Any], float]:
    from dlbs.report.compare import parse_threshold

    try:
        window, z = int(query["window"]), float(query["z"])
    except ValueError:
        raise DlbsError("window must be a whole number and z a number") from None
    min_change = parse_threshold(query["min_change"])
    filters = [Filter.parse(text) for text in query["filter"].split(";") if text.strip()]
    found = build_history(data.attempts(), by=_split(query["by"]), filters=filters,
                          metric=query["metric"])
    return found, check(found, max(window, 1), max(z, 0.0), min_change), min_change


def _experiment_details(newest: Any, store_folder: str | None = None) -> dict[str, Any]:
    """The newest attempt's results, monitor chart, trace summary and log, for its page."""
    from markupsafe import Markup

    flat = newest.as_experiment()
    results = sorted((key, _short(value)) for key, value in flat.items()
                     if key.startswith("results.") and not isinstance(value, list))
    details: dict[str, Any] = {
        "results": results,
        "params": sorted((key, _short(value)) for key, value in newest.params.items()),
        "environment": sorted((key, _short(value)) for key, value in
                              newest.environment.items()),
        "monitor_svg": None, "monitor_note": "", "trace_text": None, "trace_note": "",
    }
    try:
        from dlbs.report.plot import Chart, monitor_figure

        figure = monitor_figure([Record(flat, "", 0.0)], Chart(experiment=newest.exp_id))
        details["monitor_svg"] = Markup(charts.inline_svg(figure))
    except DlbsError as error:
        details["monitor_note"] = error.message
    try:   # only the attempt's own files, inside its run folder (attempt_files.py)
        log = attempt_log(newest.exp_id, newest.log_path, newest.run_folder, store_folder)
    except NotShown as why:
        details.update(log_text=None, log_note=str(why), trace_note="no trace shown: " +
                       ("its log is not shown" if newest.log_path else "the attempt has no log"))
        return details
    details.update(_log(log))
    details.update(_trace(newest.exp_id, log, newest.run_folder, store_folder))
    return details


def _trace(exp_id: str, log: str, run_folder: str, store_folder: str | None) -> dict[str, Any]:
    """The summary of the trace the attempt's log names (attempt_files.attempt_trace)."""
    try:
        path = attempt_trace(exp_id, log, run_folder, store_folder)
    except NotShown as why:
        return {"trace_note": str(why)}
    from dlbs.traces.reader import TraceFile
    from dlbs.traces.views import view

    try:
        trace = TraceFile(path)
        if not trace.metadata():   # a file of the run folder that is no trace dlbs wrote
            return {"trace_note": f"{path} is not shown: it is not a trace dlbs wrote"}
        table = view("summary", trace)
    except DlbsError as error:
        return {"trace_note": f"cannot read the trace {path}: {error.message}"}
    lines = ["\t".join(table.columns)]
    lines += ["\t".join(_short(row.get(column)) for column in table.columns)
              for row in table.rows]
    return {"trace_text": "\n".join([*lines, *table.notes])}


def _log(log_path: str) -> dict[str, Any]:
    """The end of the attempt's log (attempt_files.attempt_log found it)."""
    try:   # O_NONBLOCK: a FIFO put there since it was checked is never waited on
        with os.fdopen(os.open(log_path, os.O_RDONLY | os.O_NONBLOCK), "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            stream.seek(max(0, size - LOG_TAIL_BYTES))
            text = stream.read(LOG_TAIL_BYTES).decode("utf-8", "replace")
    except OSError as error:
        return {"log_text": None, "log_note": f"cannot read {log_path}: {error.strerror}"}
    note = log_path if size <= LOG_TAIL_BYTES else \
        f"{log_path}: its last {LOG_TAIL_BYTES // 1024} KiB of {size // 1024} KiB"
    return {"log_text": text, "log_note": note}


def _short(value: Any, limit: int = 2000) -> str:
    text = as_text(value)
    return text if len(text) <= limit else text[:limit] + " ..."
