"""The pages of `dlbs serve` (Starlette): runs, report, compare, history, experiments.

Every page reads the store through data.py: read-only, requests answered at once (each in a
worker thread, borrowing a connection only while it reads), and a page that shows the store
alone kept until the store changes. What a request says (a report type, `--by` keys,
filters, two run tags, an experiment id) goes to the same functions `dlbs report`, `compare`
and `history` call, never into SQL; every value on a page is escaped by the templates
(autoescape), and only SVG that matplotlib drew and the report page that dlbs/report
rendered are inserted as markup. The Content-Security-Policy header forbids the browser to
fetch anything: no script, no outside style, image or font.

Every page is bounded: a table shows PAGE_SIZE rows and links the next (`?page=N`), a
chart its newest points; a query string is at most MAX_QUERY bytes; the pages that compute
over every attempt take turns (data.py), so a slow page never makes a quick one wait. A
page that cannot show what was asked says why, keeps its form, and offers the way out (the
`--by` that would work, the tags there are).
"""

from __future__ import annotations

import contextlib
import math
import os
import urllib.parse
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from dlbs.errors import DlbsError
from dlbs.history import Settings, judge, verdict
from dlbs.history import render as history_render
from dlbs.history.check import STATUSES
from dlbs.history.series import MixedExperiments
from dlbs.report import REPORT_TYPES, Options, build_report, render
from dlbs.report.compare import Unmatched, tag_side
from dlbs.report.keys import title
from dlbs.report.numbers import significant_all
from dlbs.report.render import header_lines, layout
from dlbs.report.select import Filter, as_text, matching
from dlbs.results.attempt_files import NotShown, attempt_log, attempt_trace
from dlbs.results.columns import Record
from dlbs.results.store import is_store_url
from dlbs.util.credentials import mask_text
from dlbs.web import charts
from dlbs.web.data import Busy, Reader, StoreData

# The browser fetches nothing but the page: styles are inline, charts inline SVG.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "img-src data:; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
# Rows of a table page (runs, experiments, history, a comparison, a chart's points).
PAGE_SIZE = 100
# A report of more rows shows its first rows (and the whole table as CSV).
PAGE_ROWS = 1000
# Bytes of a log shown (its end); a query string's bytes at most; a chart's points at most.
LOG_TAIL_BYTES = 256 * 1024
MAX_QUERY = 8192
CHART_POINTS = 200
# The history's lookback window at most (each point of it is drawn and read).
MAX_WINDOW = 1000
# Traces summarised on an experiment's page (its newest traced attempts).
TRACES_SHOWN = 5
_SHOWN_COLUMNS = ("exp.model", "exp.replica_batch", "exp.num_gpus", "exp.dtype",
                  "results.status", "results.time_median", "results.throughput")
# What a configuration is, by default (the History page says so).
CONFIGURATION = ("a configuration is an experiment (its exp.id: every identity parameter) on "
                 "one device model, as a report row is")
# Titles of keys a report does not title.
_TITLES = {"env.host": "host"}
# The order of a comparison's rows: what needs a look first.
_COMPARE_ORDER = ("slower", "now fails", "faster", "now ok", "not significant", "untested",
                  "no value", "both fail", "same")


def create_app(location: str, *, heavy: int | None = None,
               waiting: int | None = None) -> Starlette:
    """The application over the store at `location` (opened now, read-only)."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    limits = {name: value for name, value in (("heavy", heavy), ("waiting", waiting))
              if value is not None}
    store = StoreData(location, **limits)
    # Where an SQLite store's run folders may be now: a folder copied with its logs.
    store_folder = None if is_store_url(location) else \
        os.path.dirname(os.path.abspath(location))
    templates = Environment(loader=PackageLoader("dlbs.web", "templates"),
                            autoescape=select_autoescape(("html", "j2")),
                            trim_blocks=True, lstrip_blocks=True)

    def page(name: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = templates.get_template(name).render(store=store.name, **values)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def failure(error: DlbsError, status: int = 400) -> HTMLResponse:
        # Messages name stores without passwords; a URL someone typed too.
        return page("error.html.j2", status, heading="Cannot show this",
                    message=mask_text(error.message), hint=mask_text(error.hint or "") or None)

    def handler(build: Callable[[Request, Reader], Response], *, store_only: bool = True,
                heavy: bool = False) -> Callable[[Request], Response]:
        """A page.

        `store_only`: it shows the store alone, kept per version; `heavy`: it computes over
        every attempt and takes its turn (data.py).
        """
        def respond(request: Request) -> Response:
            if len(request.url.query) > MAX_QUERY:
                return failure(DlbsError(f"the query is {len(request.url.query)} bytes; "
                                         f"at most {MAX_QUERY}"), 414)
            with store.reading() as reader:
                def built() -> Response:
                    if not heavy:
                        return build(request, reader)
                    with store.heavy():
                        return build(request, reader)
                try:
                    if not store_only:
                        return built()
                    key = (reader.version(), request.url.path,
                           tuple(sorted(request.query_params.multi_items())))
                    return _copy(store.pages.get(key, lambda: _sized(built())))
                except Busy as error:
                    response = failure(error, 503)
                    response.headers["Retry-After"] = "2"
                    return response
                except DlbsError as error:
                    return failure(error)
        return respond

    def runs(request: Request, data: Reader) -> Response:
        found = data.runs()
        number, shown = _paged(found, request)
        return page("runs.html.j2", heading="Runs", runs=shown,
                    pager=_pager(request, number, len(found)))

    def experiments(request: Request, data: Reader) -> Response:
        attempts = data.attempts()
        tag = request.query_params.get("tag")
        filters = [Filter("runtime.run_tag", tag)] if tag else []
        rows = np.flatnonzero(matching(attempts, filters)) if filters else \
            np.arange(attempts.size)
        number, page_rows = _paged(rows, request)
        columns = [attempts.column(key) for key in ("exp.id", *_SHOWN_COLUMNS)]
        shown = [[as_text(column.values[column.codes[row]]) for column in columns]
                 for row in page_rows.tolist()]
        return page("experiments.html.j2", heading="Experiments", tag=tag, rows=shown,
                    headers=["exp.id", *_SHOWN_COLUMNS], pager=_pager(request, number,
                                                                     len(rows)))

    def report(request: Request, data: Reader) -> Response:
        from dlbs.report.html import render_html

        query = request.query_params
        kind = query.get("type") or "regular"
        filters = [Filter.parse(text) for text in query.getlist("filter")[:16] if text]
        form = dict(types=REPORT_TYPES, kind=kind, by=query.get("by") or "",
                    filters=[f"{item.key}={item.pattern}" for item in filters] or [""],
                    columns=query.get("columns") or "", latest=query.get("latest") in
                    ("1", "on", "true"))
        try:
            if kind not in REPORT_TYPES:
                raise DlbsError(f"unknown report type {kind!r}; expected one of "
                                f"{', '.join(REPORT_TYPES)}")
            fmt = query.get("format") or "html"
            if fmt not in ("html", "csv"):
                raise DlbsError(f"unknown format {fmt!r}; expected html or csv")
            options = Options(kind=kind, by=_split(query.get("by")), filters=filters,
                              columns=_split(query.get("columns")), latest=form["latest"],
                              rows=_split(query.get("rows")), cols=query.get("cols") or None,
                              value=query.get("value") or None)
            report = build_report(data.attempts(), options)
        except DlbsError as error:
            return page("report_error.html.j2", 400, heading="Cannot show this report",
                        form=form, message=mask_text(error.message),
                        hint=mask_text(error.hint or "") or None)
        if fmt == "csv":   # the whole table, as `dlbs report --format csv` writes it
            return Response(render(report, "csv"), media_type="text/csv", headers={
                **SECURITY_HEADERS, "Content-Disposition": 'attachment; filename="report.csv"'})
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
        values = _compare_page(request, data)
        if values.get("csv") is not None:
            return Response(values["csv"], media_type="text/csv", headers={
                **SECURITY_HEADERS,
                "Content-Disposition": 'attachment; filename="comparison.csv"'})
        return page("compare.html.j2", 400 if values.get("error") else 200,
                    heading="Compare two runs", **values)

    def history(request: Request, data: Reader) -> Response:
        values = _history_page(request, data)
        return page("history.html.j2", 400 if values.get("error") else 200,
                    heading="History", **values)

    def history_chart(request: Request, data: Reader) -> Response:
        query = _history_query(request)
        settings = _settings(query)
        found = data.history(_split(query["by"]), _filters(query), query["metric"])
        judgement = judge(found, settings)
        try:
            index = int(request.query_params.get("index", ""))
            item = verdict(found, judgement, index)
        except (ValueError, IndexError):
            return page("error.html.j2", 404, heading="No such configuration",
                        message="the history has no configuration of that number",
                        hint="its number is its row on the History page (the link 'chart')")
        from markupsafe import Markup

        series = item.series
        description = ", ".join(f"{title(key)} {as_text(value)}"
                                for key, value in zip(found.keys, series.shown))
        judged = history_render.judged_run(item)
        drawn = min(len(series.values), max(CHART_POINTS, item.window + 1))
        points = _chart_points(series, item, request)
        newest = f" (the newest {drawn} of {len(series.values)})" \
            if drawn < len(series.values) else ""
        caption = (f"{history_render.statistic(found)} of each run, oldest first{newest}"
                   f"; the band: the lookback window's mean ± z·std (z {settings.z:g}, "
                   f"{item.window} run(s)); the ringed point: the run judged, "
                   f"{judged.tag or '(no tag)'}: {item.status}")
        return page("chart.html.j2", heading="History of one configuration",
                    description=description or series.exp_ids[-1], metric=found.metric,
                    statistic=history_render.statistic(found), verdict=item,
                    judged=judged, judged_ended=history_render.when(judged.ended),
                    points=points["rows"], pager=points["pager"],
                    svg=Markup(charts.history_chart(series, found, item, settings.z, drawn)),
                    caption=caption, back=urllib.parse.urlencode(
                        {k: v for k, v in query.items() if k != "page"}))

    def experiment(request: Request, data: Reader) -> Response:
        exp_id = request.path_params["exp_id"]
        attempts = data.experiment(exp_id)
        if not attempts:
            return page("error.html.j2", 404, heading="No such experiment",
                        message=f"the store holds no experiment {exp_id}")
        try:
            chosen = int(request.query_params.get("attempt") or attempts[-1].attempt)
            shown = next(item for item in attempts if item.attempt == chosen)
        except (ValueError, StopIteration):
            return page("error.html.j2", 404, heading="No such attempt",
                        message=f"experiment {exp_id} has no attempt "
                                f"{request.query_params.get('attempt')!r}",
                        hint=f"its attempts: {', '.join(str(a.attempt) for a in attempts)}")
        listed = attempts[-PAGE_SIZE:]
        return page("experiment.html.j2", heading=f"Experiment {exp_id}",
                    attempts=listed, earlier=len(attempts) - len(listed), shown=shown,
                    traces=_traces(attempts, store_folder),
                    **_experiment_details(shown, store_folder))

    routes = [Route("/", handler(runs)), Route("/experiments", handler(experiments)),
              Route("/report", handler(report, heavy=True)),
              Route("/compare", handler(compare, heavy=True)),
              Route("/history", handler(history, heavy=True)),
              Route("/history/chart", handler(history_chart, heavy=True)),
              # An experiment's page shows its log and trace files, which change on their own.
              Route("/experiment/{exp_id:path}", handler(experiment, store_only=False))]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        store.close()

    application = Starlette(routes=routes, lifespan=lifespan)
    application.state.store_name = store.name
    return application


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


# -- paging ----------------------------------------------------------------------------------

def _page_number(request: Request, name: str = "page") -> int:
    text = request.query_params.get(name) or "1"
    try:
        number = int(text)
    except ValueError:
        raise DlbsError(f"{name} {text!r} is not a page number") from None
    if not 1 <= number <= 10**9:
        raise DlbsError(f"{name} {text!r} is not a page number (1, 2, ...)")
    return number


def _paged(items: Any, request: Request, name: str = "page") -> tuple[int, Any]:
    """The page of `items` the request asks for: its number, its items (beyond: the last)."""
    number = _page_number(request, name)
    pages = max(1, math.ceil(len(items) / PAGE_SIZE))
    number = min(number, pages)
    return number, items[(number - 1) * PAGE_SIZE:number * PAGE_SIZE]


def _pager(request: Request, number: int, total: int, name: str = "page") -> dict[str, Any]:
    """What the pager shows: rows first-last of total, links to the pages before and after."""
    def link(target: int) -> str:
        kept = [(k, v) for k, v in request.query_params.multi_items() if k != name]
        return "?" + urllib.parse.urlencode([*kept, (name, str(target))])

    pages = max(1, math.ceil(total / PAGE_SIZE))
    first = (number - 1) * PAGE_SIZE + 1 if total else 0
    return {"first": first, "last": min(number * PAGE_SIZE, total), "total": total,
            "number": number, "pages": pages,
            "previous": link(number - 1) if number > 1 else None,
            "next": link(number + 1) if number < pages else None,
            "first_link": link(1) if number > 2 else None,
            "last_link": link(pages) if number < pages - 1 else None}


# -- history ---------------------------------------------------------------------------------

def _history_query(request: Request) -> dict[str, str]:
    query = request.query_params
    # `by` as one comma list, or ticked keys (by=exp.model&by=exp.replica_batch).
    by = ",".join(dict.fromkeys(item.strip() for text in query.getlist("by")
                                for item in text.split(",") if item.strip()))
    return {"by": by, "filter": query.get("filter") or "",
            "metric": query.get("metric") or "time_median",
            "window": query.get("window") or "20", "z": query.get("z") or "3",
            "min_change": query.get("min_change") or "5%",
            "status": query.get("status") or ""}


def _settings(query: dict[str, str]) -> Settings:
    from dlbs.report.compare import parse_threshold

    try:
        window, z = int(query["window"]), float(query["z"])
    except ValueError:
        raise DlbsError("window must be a whole number and z a number") from None
    if window > MAX_WINDOW:
        raise DlbsError(f"window {window}: at most {MAX_WINDOW} runs")
    return Settings(window, z, parse_threshold(query["min_change"]))


def _filters(query: dict[str, str]) -> list[Filter]:
    texts = [text for text in query["filter"].split(";") if text.strip()]
    if len(texts) > 16:
        raise DlbsError(f"{len(texts)} filters: at most 16")
    return [Filter.parse(text) for text in texts]


def _history_page(request: Request, data: Reader) -> dict[str, Any]:
    """The History page's values: the verdicts of one page, sorted worst first."""
    query = _history_query(request)
    values: dict[str, Any] = {"query": query, "rows": [], "headers": [], "summary": "",
                              "configuration": CONFIGURATION, "error": None, "hint": None,
                              "fix": None, "statuses": STATUSES, "left_out": []}
    try:
        settings = _settings(query)
        found = data.history(_split(query["by"]), _filters(query), query["metric"])
    except DlbsError as error:
        values.update(error=mask_text(error.message), hint=mask_text(error.hint or "") or None,
                      choices=_grouping_choices(data, query))
        if isinstance(error, MixedExperiments):
            values["fix"] = {"by": ",".join(error.by), "query": urllib.parse.urlencode(
                {**query, "by": ",".join(error.by)})}
        return values
    judgement = judge(found, settings)
    order = np.lexsort((np.arange(found.size), judgement.status))
    if query["status"]:
        if query["status"] not in STATUSES:
            raise DlbsError(f"status {query['status']!r}: one of {', '.join(STATUSES)}")
        order = order[judgement.status[order] == STATUSES.index(query["status"])]
    number, indices = _paged(order, request)
    verdicts = [verdict(found, judgement, int(index)) for index in indices.tolist()]
    headers, cells = history_render.verdict_table(found, verdicts)
    kept = {k: v for k, v in query.items() if k != "status"}
    values.update(
        headers=headers, pager=_pager(request, number, len(order)),
        rows=[{"cells": row, "status": item.status,
               "query": urllib.parse.urlencode({**kept, "index": int(index)})}
              for row, item, index in zip(cells, verdicts, indices.tolist())],
        counts=[(status, judgement.count(status), urllib.parse.urlencode(
            {**kept, "status": status})) for status in STATUSES],
        all_query=urllib.parse.urlencode(kept),
        summary=(f"{found.size} configuration(s), {found.point_count} run(s); window "
                 f"{settings.window}, z {settings.z:g}, min change "
                 f"{settings.min_change:.1%} of {history_render.statistic(found)}"),
        grouped=query["by"], choices=_grouping_choices(data, query),
        left_out=history_render.left_out_lines(found),
        problems=history_render.problem_lines(found, [v for v in verdicts
                                                       if v.series.problem is not None]))
    return values


def _grouping_choices(data: Reader, query: dict[str, str]) -> list[dict[str, Any]]:
    """The keys a configuration may be grouped by: those that vary, the host, the device."""
    from dlbs.report import keys as keys_module
    from dlbs.report.identity import DEVICE_MODEL, key_rules

    def varying() -> list[str]:
        attempts = data.attempts()
        rows = np.arange(attempts.size)
        rules = key_rules(attempts)
        values_of = keys_module.value_lists(attempts, rows)
        found = keys_module.varying_keys(
            values_of, keys_module.identity_keys(attempts, rows, rules), attempts)
        found = [key for key in keys_module.preference(found, rules) if key != DEVICE_MODEL]
        return [*found[:12], DEVICE_MODEL, "env.host"]

    chosen = set(_split(query["by"]) or ())
    keys = data.kept("grouping keys", varying)
    return [{"key": key, "title": _TITLES.get(key, title(key)), "checked": key in chosen}
            for key in keys]


def _chart_points(series: Any, item: Any, request: Request) -> dict[str, Any]:
    """The chart page's table: every point, newest first, a page at a time, rounded."""
    count = len(series.values)
    newest_first = np.arange(count)[::-1]
    number, shown = _paged(newest_first, request)
    texts = significant_all(series.values[shown])
    window_start = count - 1 - item.window
    rows = [{"tag": as_text(series.tags[i]), "host": as_text(series.hosts[i]),
             "exp_id": series.exp_ids[i], "ended": history_render.when(series.ended[i]),
             "value": text, "exact": repr(float(series.values[i])),
             "role": "judged" if i == count - 1 else
             "window" if window_start <= i < count - 1 else ""}
            for i, text in zip(shown.tolist(), texts)]
    return {"rows": rows, "pager": _pager(request, number, count)}


# -- compare ---------------------------------------------------------------------------------

def _compare_page(request: Request, data: Reader) -> dict[str, Any]:
    """The Compare page's values (or `csv`): two tags, the table of one page, worst first."""
    from dlbs.report.compare import VERDICTS, compare, parse_threshold
    from dlbs.report.render_compare import STATISTIC, notes, render_comparison, summary_line

    query = request.query_params
    tags = data.tags()
    form = {"base": query.get("base") or (tags[1] if len(tags) > 1 else ""),
            "new": query.get("new") or (tags[0] if tags else ""),
            "by": query.get("by") or "", "filter": query.get("filter") or "",
            "threshold": query.get("threshold") or "3%", "alpha": query.get("alpha") or "0.01",
            "verdict": query.get("verdict") or ""}
    values: dict[str, Any] = {"tags": tags[:500], "form": form, "statistic": STATISTIC,
                              "error": None, "hint": None, "fixes": [], "rows": None}
    if not form["base"] or not form["new"]:
        values["error"] = "the store has fewer than two run tags to compare" if len(tags) < 2 \
            else "choose a base and a new run tag"
        values["hint"] = "a run is named with -P runtime.run_tag=NAME (docs/results.md)"
        return values
    try:
        try:
            alpha = float(form["alpha"])
        except ValueError:
            raise DlbsError(f"alpha {form['alpha']!r} is not a number") from None
        filters = [Filter.parse(text) for text in form["filter"].split(";") if text.strip()]
        attempts = data.attempts()
        comparison = compare(tag_side(attempts, form["base"], "BASE"),
                             tag_side(attempts, form["new"], "NEW"),
                             by=_split(form["by"]), filters=filters,
                             threshold=parse_threshold(form["threshold"]), alpha=alpha)
    except DlbsError as error:
        values.update(error=mask_text(error.message), hint=mask_text(error.hint or "") or None)
        if isinstance(error, Unmatched) and error.by:
            values["fixes"].append((f"compare --by {','.join(error.by)}", urllib.parse.urlencode(
                {**form, "by": ",".join(error.by)})))
        defaults = {"by": "", "filter": "", "threshold": "3%", "alpha": "0.01", "verdict": ""}
        if any(form[key] != value for key, value in defaults.items()):
            values["fixes"].append(("compare these runs with the default options",
                                    urllib.parse.urlencode({**form, **defaults})))
        if len(tags) > 1 and (form["base"], form["new"]) != (tags[1], tags[0]):
            values["fixes"].append((f"compare the two newest runs ({tags[1]}, {tags[0]})",
                                    urllib.parse.urlencode({**form, **defaults,
                                                            "base": tags[1], "new": tags[0]})))
        return values
    if query.get("format") == "csv":
        return {"csv": render_comparison(comparison, "csv")}
    rank = np.array([_COMPARE_ORDER.index(name) for name in VERDICTS])[comparison.verdict]
    from dlbs.report.ordering import ordered_by_codes

    by_keys = ordered_by_codes(comparison.shown_codes, comparison.shown_tables, comparison.size)
    position = np.empty(comparison.size, dtype=np.intp)
    position[by_keys] = np.arange(comparison.size)
    order = np.lexsort((position, rank))
    if form["verdict"]:
        if form["verdict"] not in VERDICTS:
            raise DlbsError(f"verdict {form['verdict']!r}: one of {', '.join(VERDICTS)}")
        order = order[comparison.verdict[order] == VERDICTS.index(form["verdict"])]
    number, shown = _paged(order, request)
    key_texts = [[as_text(table[code]) for code in codes[shown].tolist()]
                 for codes, table in zip(comparison.shown_codes, comparison.shown_tables)]
    base_ms = significant_all(comparison.base_value[shown])
    new_ms = significant_all(comparison.new_value[shown])
    changes = ["-" if c != c else f"{c:+.1%}" for c in comparison.change[shown].tolist()]
    p_values = ["-" if p != p else f"{p:.2g}" for p in comparison.p_value[shown].tolist()]
    base_ids, new_ids = comparison.ids()
    rows = [{"keys": [texts[i] for texts in key_texts], "base": base_ms[i], "new": new_ms[i],
             "change": changes[i], "p": p_values[i], "verdict": VERDICTS[code],
             "base_id": base_ids[index], "new_id": new_ids[index]}
            for i, (index, code) in enumerate(zip(shown.tolist(),
                                                  comparison.verdict[shown].tolist()))]
    counts = comparison.counts()
    kept = {k: v for k, v in form.items() if k != "verdict"}
    values.update(
        headers=[title(key) for key in comparison.keys], rows=rows,
        pager=_pager(request, number, len(order)), summary=summary_line(comparison),
        notes=notes(comparison),
        counts=[(name, counts[name], urllib.parse.urlencode({**kept, "verdict": name}))
                for name in _COMPARE_ORDER if counts[name]],
        all_query=urllib.parse.urlencode(kept),
        only=[(name, len(side), [", ".join(as_text(v) for v in row) for row in side[:20]])
              for name, side in (("BASE", comparison.base_only), ("NEW", comparison.new_only))
              if side],
        csv_query=urllib.parse.urlencode({**form, "format": "csv"}))
    return values


# -- an experiment ---------------------------------------------------------------------------

def _experiment_details(shown: Any, store_folder: str | None = None) -> dict[str, Any]:
    """One attempt's results, monitor chart and log, for its experiment's page."""
    from markupsafe import Markup

    flat = shown.as_experiment()
    results = sorted((key, _short(value)) for key, value in flat.items()
                     if key.startswith("results.") and not isinstance(value, list))
    details: dict[str, Any] = {
        "results": results,
        "params": sorted((key, _short(value)) for key, value in shown.params.items()),
        "environment": sorted((key, _short(value)) for key, value in
                              shown.environment.items()),
        "monitor_svg": None, "monitor_note": "",
    }
    try:
        from dlbs.report.plot import Chart, monitor_figure

        figure = monitor_figure([Record(flat, "", 0.0)], Chart(experiment=shown.exp_id))
        details["monitor_svg"] = Markup(charts.inline_svg(figure))
    except DlbsError as error:
        details["monitor_note"] = error.message
    try:   # only the attempt's own files, inside its run folder (attempt_files.py)
        log = attempt_log(shown.exp_id, shown.log_path, shown.run_folder, store_folder)
    except NotShown as why:
        details.update(log_text=None, log_note=str(why))
        return details
    details.update(_log(log))
    return details


def _traces(attempts: Sequence[Any], store_folder: str | None) -> dict[str, Any]:
    """Every attempt's trace: a summary of the newest TRACES_SHOWN traced, a word on each.

    A trace is shown only where attempt_files finds it the attempt's own (its log, inside its
    run folder, names it as planned).
    """
    traced = [item for item in attempts
              if isinstance(item.results.get("results.trace_file"), str)
              and item.results.get("results.trace_file")]
    summaries = []
    for item in reversed(traced[-TRACES_SHOWN:]):
        summary = _trace(item, store_folder)
        summaries.append({"attempt": item.attempt, "file": item.results["results.trace_file"],
                          **summary})
    untraced = [item.attempt for item in attempts if item not in traced]
    note = "" if traced else "no attempt was traced (run with exp.trace_level set: " \
        "docs/tracing.md)"
    if traced and untraced:
        note = f"attempt(s) {', '.join(map(str, untraced))} ran without a trace"
    if len(traced) > TRACES_SHOWN:
        note += (("; " if note else "") + f"the {len(traced) - TRACES_SHOWN} older traced "
                 "attempt(s) are summarised by `dlbs trace`")
    return {"summaries": summaries, "note": note}


def _trace(attempt: Any, store_folder: str | None) -> dict[str, Any]:
    """The summary of the trace an attempt's log names (attempt_files.attempt_trace)."""
    try:
        log = attempt_log(attempt.exp_id, attempt.log_path, attempt.run_folder, store_folder)
        path = attempt_trace(attempt.exp_id, log, attempt.run_folder, store_folder)
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
