"""Shared helpers of the results tests: experiment dicts and the CLI as a subprocess."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


def experiment(model: str, gpus: int, replica_batch: int, time_ms: float | None,
               status: str | None = "ok", exp_id: str | None = None,
               dtype: str = "float32", phase: str = "training", device: str = "gpu",
               effective_batch: int | None = None, end_time: str | None = None,
               **extra: Any) -> dict[str, Any]:
    """A flat experiment dict as `dlbs parse` gives one."""
    result: dict[str, Any] = {
        "exp.id": exp_id or f"{model}-{dtype}-{phase}-{gpus}-{replica_batch}",
        "exp.model": model, "exp.framework": "pytorch", "exp.dtype": dtype,
        "exp.phase": phase, "exp.device_type": device,
        "exp.num_gpus": gpus if device == "gpu" else 0,
        "exp.replica_batch": replica_batch,
        "exp.effective_batch": effective_batch or replica_batch * max(gpus, 1),
    }
    if time_ms is not None:
        result["results.time"] = time_ms
    if status is not None:
        result["results.status"] = status
    if end_time is not None:
        result["results.end_time"] = end_time
    result.update(extra)
    return result


def write_log(path: Path, values: dict[str, Any], noise: bool = True) -> Path:
    """A log in the protocol (header, some backend chatter, results)."""
    import json

    lines = [f"__{key}__={json.dumps(value)}" for key, value in values.items()]
    if noise:
        lines.insert(len(lines) // 2, "some backend output that is not a protocol line")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def dlbs_cli(*args: str, cwd: Path | None = None,
             timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run `python -m dlbs.cli.main ARGS` as a user would (the repo on PYTHONPATH)."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = str(REPO) + os.pathsep + environment.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "dlbs.cli.main", *args], cwd=cwd or REPO, env=environment,
        capture_output=True, text=True, timeout=timeout, check=False,
    )


# -- PostgreSQL (.ci/services/postgres.sh) ------------------------------------------------

def postgres_url() -> str:
    """The URL of this run's database on the test cluster (tests/runs.py).

    No test sees what an earlier run of the suite left in the cluster: each run has a
    database of its own, made at the first call and dropped when the run ends.
    """
    from tests import runs

    return runs.database_url(_server_url())


def _server_url() -> str:
    """The test cluster's URL: DLBS_TEST_POSTGRES_URL (scripts/test.sh), else the service's.

    The service script is idempotent and prints the URL last; a machine where it cannot
    start PostgreSQL fails the test (it never skips).
    """
    import pytest

    url = os.environ.get("DLBS_TEST_POSTGRES_URL")
    if url:
        return url
    done = subprocess.run(["bash", str(REPO / ".ci" / "services" / "postgres.sh")],
                          capture_output=True, text=True, timeout=600, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("postgresql://"):
        pytest.fail(f"PostgreSQL is needed (.ci/services/postgres.sh): {done.stderr[-2000:]}")
    os.environ["DLBS_TEST_POSTGRES_URL"] = lines[-1]
    return lines[-1]


def with_search_path(url: str, schema: str) -> str:
    """`url` with its tables in `schema` (libpq's options, URL-quoted)."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


@contextlib.contextmanager
def postgres_store_url(url: str | None = None) -> Iterator[str]:
    """A URL of an empty schema of its own in the test database, dropped afterwards."""
    import psycopg

    url = url or postgres_url()
    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    try:
        yield with_search_path(url, name)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE")


# -- dlbs serve ------------------------------------------------------------------------------

@contextlib.contextmanager
def serve_in_process(location: str, head_timeout: float | None = None,
                     **options: Any) -> Iterator[str]:
    """`dlbs serve`'s application on a free localhost port, in this process; its base URL.

    `options` go to create_app (heavy, waiting); `head_timeout` to the server.
    """
    import threading

    import uvicorn

    from dlbs.web import create_app
    from dlbs.web.server import HEAD_TIMEOUT, config

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(config(create_app(location, **options), "127.0.0.1", port,
                                   head_timeout=head_timeout or HEAD_TIMEOUT))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.started, "the server did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def http_get(base: str, path: str) -> tuple[int, dict[str, str], str]:
    """GET `path` of a server: (status, headers, body)."""
    import http.client
    import urllib.parse

    parts = urllib.parse.urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        connection.close()


# -- history: one attempt per configuration and run ----------------------------------------

def nightly_attempt(model: str, day: int, median: float, *, batch: int = 32,
                    host: str = "ci", tag: str | None = None, status: str = "ok",
                    attempt: int | None = None, samples: int = 5, gpu: str = "H100",
                    year_month: str = "2026-02", exp_id: str | None = None,
                    framework: str = "pytorch") -> Any:
    """An attempt of (`model`, `batch`) run on `day` under tag nightly-DD on `host`.

    `median` fills its per-batch times; `status` other than ok records no times. Its
    attempt number is `day` unless given.
    """
    from dlbs.results.store import Attempt

    tag = tag if tag is not None else f"nightly-{day:02d}"
    params = {"exp.model": model, "exp.framework": framework, "exp.device_type": "gpu",
              "exp.num_gpus": 1, "exp.replica_batch": batch, "exp.effective_batch": batch,
              "runtime.run_tag": tag}
    results = {"results.time_data": [median] * samples} if status == "ok" else {}
    return Attempt(exp_id or f"id-{model}-{batch}", attempt or day, status,
                   None if status == "ok" else f"it {status}", params, results, None,
                   {"gpu_model": gpu, "host": host}, None,
                   f"{year_month}-{day:02d}T01:00:00.000+00:00",
                   f"{year_month}-{day:02d}T01:10:00.000+00:00",
                   run_tag=tag, run_host=host, run_folder="/ci/logs")


def table_cells(page: str, table: str) -> list[list[str]]:
    """The text of each cell of the table `id="table"` of a page, row by row."""
    import html
    import re

    body = page[page.index(f'<table id="{table}">'):]
    body = body[:body.index("</table>")]
    return [[html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
             for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


#: The colour of a regression, a slower match, a failure on the pages (base.html.j2).
RED = "rgb(207, 34, 46)"


def browse(base: str, pages: dict[str, str], profile: Path,
           refused: tuple[str, ...] = ()) -> dict[str, Any]:
    """Each page of `pages` (path -> a CSS selector it must have) in headless Chromium.

    The selector's element is there; a `td.regression` or `td.slower` one is red; an `svg`
    one is drawn (wider than 100 px) and its text is returned; the browser logs no problem
    (a path in `refused` may answer 400: it says why on the page) and asks for nothing but
    the page.
    """
    from tests.report.cdp import Browser, is_problem

    texts: dict[str, Any] = {}
    with Browser(profile) as browser:
        for path, selector in pages.items():
            browser.events.clear()
            session = browser.open_page(base + path)

            def evaluate(expression: str, session: str = session) -> Any:
                reply = browser.send("Runtime.evaluate", session, expression=expression,
                                     returnByValue=True)
                return reply["result"].get("value")

            assert evaluate(f"document.querySelectorAll('{selector}').length") >= 1, path
            if selector.endswith(("td.regression", "td.slower")):
                assert evaluate(f"getComputedStyle(document.querySelector('{selector}'))"
                                ".color") == RED, path
            if selector.endswith("svg"):
                assert evaluate(f"document.querySelector('{selector}').getBBox().width") > 100
                texts[path] = evaluate(f"document.querySelector('{selector}').textContent")
            events = list(browser.events)
            allowed = "status of 400" if path in refused else None
            assert [event for event in events if is_problem(event)
                    and not (allowed and allowed in str(event))] == [], path
            requested = [e["params"]["request"]["url"] for e in events
                         if e.get("method") == "Network.requestWillBeSent"]
            assert requested == [base + path], path
    return texts
