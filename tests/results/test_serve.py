"""`dlbs serve`: every page of a real sweep's store, over HTTP and in a headless Chromium.

The store holds a real dummy sweep run twice under two tags (the resource monitor on, one
failure) and a hostile value; the server is `dlbs serve` itself, a subprocess on a free
localhost port. Chromium (the DevTools client of tests/report/cdp.py) loads each page: it
renders its tables and charts, logs no error, and asks the server for nothing else.
"""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dlbs.results.store import open_store
from tests.report.cdp import Browser, is_problem
from tests.report.conftest import REPO, dummy_run

HOSTILE = "<script>alert('x')</script>"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(the server's base URL, the store) of a two-run sweep."""
    root = tmp_path_factory.mktemp("serve")
    logs = root / "logs"
    sweep = ("-V", 'exp.model=["resnet50", "vgg16", "alexnet"]', "-P", "exp.num_batches=8",
             "-P", "dummy.sleep=0.01", "-P", "monitor.frequency=0.02", "-E",
             '{"condition": {"exp.model": "alexnet"}, "parameters": {"dummy.fail": "exit"}}')
    for tag in ("v1", "v2"):
        result = dummy_run(logs, *sweep, "-P", f"runtime.run_tag={tag}")
        assert result.returncode == 1 and "2 ok" in result.stderr, result.stderr
    database = logs / "results.db"
    with open_store(database) as store:
        store.record_attempt("hostile", 1, {"exp.model": HOSTILE, "runtime.run_tag": HOSTILE},
                             "failure", status_msg=HOSTILE, run=(HOSTILE, "h", "/f"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "serve", str(database),
                               "--port", str(port)], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                _get(base, "/")
                break
            except OSError:
                assert server.poll() is None, server.communicate()[1]
                time.sleep(0.2)
        yield base, database
    finally:
        server.terminate()
        server.wait(timeout=30)
        server.stdout.close()
        server.stderr.close()


def _get(base: str, path: str) -> tuple[int, dict[str, str], str]:
    parts = urllib.parse.urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        connection.close()


def _pages(base: str, database: Path) -> list[str]:
    with open_store(database) as store:
        exp_id = next(a.exp_id for a in store.attempts() if a.params.get("exp.model") == "vgg16")
    return ["/", "/experiments?tag=v2", "/report", "/report?type=weak&by=exp.model",
            "/compare?base=v1&new=v2", "/history", "/history/chart?index=0",
            f"/experiment/{exp_id}"]


def test_every_page_answers_escaped_and_read_only(served: tuple[str, Path]) -> None:
    base, database = served
    before = database.stat().st_mtime_ns
    for path in _pages(base, database):
        status, headers, body = _get(base, path)
        assert status == 200, (path, body[-2000:])
        assert "default-src 'none'" in headers["content-security-policy"]
        assert "<table" in body, path
        assert HOSTILE not in body and "<script" not in body, path
    _, _, runs = _get(base, "/")
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in runs
    _, _, page = _get(base, "/experiment/hostile")
    assert "&lt;script&gt;" in page and HOSTILE not in page
    status, _, body = _get(base, "/report?type=bogus")
    assert status == 400 and "unknown report type" in body
    status, _, _ = _get(base, "/experiment/no-such-id")
    assert status == 404
    # A filter is a glob matched in Python, never SQL: this one just matches nothing.
    status, _, body = _get(base, "/report?filter=" + urllib.parse.quote(
        "exp.model=' OR 1=1; DROP TABLE attempts; --"))
    assert status == 200 and "No ok experiments to report" in body
    assert database.stat().st_mtime_ns == before
    with open_store(database) as store:
        assert len(store.attempts()) == 7


def test_the_report_page_is_the_reports_engine(served: tuple[str, Path], dlbs_cli) -> None:
    base, database = served
    _, _, page = _get(base, "/report?type=weak")
    cli = dlbs_cli("report", str(database), "--type", "weak", "--format", "html")
    assert cli.returncode == 0
    table = cli.stdout[cli.stdout.index('<section id="tables">'):cli.stdout.index("</section>")]
    assert table in page


def test_the_history_page_shows_each_configurations_runs(served: tuple[str, Path]) -> None:
    base, _ = served
    _, _, page = _get(base, "/history")
    assert page.count("<td>steady</td>") + page.count("<td>too few</td>") >= 2
    _, _, chart = _get(base, "/history/chart?index=0")
    assert "<svg" in chart and ">v1<" in chart and ">v2<" in chart


@pytest.mark.browser
@pytest.mark.slow
def test_every_page_renders_in_chromium_and_fetches_nothing_else(
        served: tuple[str, Path], tmp_path: Path) -> None:
    base, database = served
    with Browser(tmp_path / "profile") as browser:
        for path in _pages(base, database):
            browser.events.clear()
            url = base + path
            session = browser.open_page(url)

            def evaluate(expression: str, session: str = session) -> Any:
                reply = browser.send("Runtime.evaluate", session, expression=expression,
                                     returnByValue=True)
                return reply["result"].get("value")

            assert evaluate("document.querySelectorAll('table').length") >= 1, path
            if path.startswith(("/report", "/history/chart", "/experiment/")):
                assert evaluate("document.querySelectorAll('svg').length") >= 1, path
                assert evaluate("document.querySelector('svg').getBBox().width") > 100, path
            events = list(browser.events)
            problems = [event for event in events if is_problem(event)]
            assert problems == [], path
            requested = [e["params"]["request"]["url"] for e in events
                         if e.get("method") == "Network.requestWillBeSent"]
            assert requested == [url], path


def test_a_report_of_many_rows_shows_its_first_and_gives_all_as_csv(tmp_path: Path) -> None:
    import threading

    import uvicorn

    from dlbs.results.store import Attempt
    from dlbs.web import create_app
    from dlbs.web.app import PAGE_ROWS

    database = tmp_path / "many.db"
    items = [Attempt(f"e{i}", 1, "ok", None, {"exp.model": "resnet50", "trial": i,
                                              "exp.framework": "pytorch"},
                     {"results.time_data": [1.0, 2.0, 3.0]}, None, {}, None,
                     "2026-01-01T10:00:00.000+00:00", "2026-01-01T10:01:00.000+00:00")
             for i in range(PAGE_ROWS + 5)]
    with open_store(database) as store:
        store.record_attempts(items)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(str(database)), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        status, _, page = _get(base, "/report?filter=exp.model%3Dresnet*")
        assert status == 200 and f"{PAGE_ROWS + 5} rows: the first {PAGE_ROWS}" in page
        assert page.count("<tr>") == PAGE_ROWS + 1
        status, headers, csv_text = _get(base, "/report?filter=exp.model%3Dresnet*&format=csv")
        assert status == 200 and headers["content-type"].startswith("text/csv")
        assert len(csv_text.strip().splitlines()) == PAGE_ROWS + 5 + 1
    finally:
        server.should_exit = True
        thread.join(timeout=30)
