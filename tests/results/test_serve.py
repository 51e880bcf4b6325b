"""`dlbs serve`: every page of a real sweep's store, over HTTP and in a headless Chromium.

The store holds a real dummy sweep run twice under two tags (the resource monitor on, one
failure) and a hostile value; the server is `dlbs serve` itself, a subprocess on a free
localhost port. Chromium (the DevTools client of tests/report/cdp.py) loads each page: it
renders its tables and charts, logs no error, and asks the server for nothing else.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers_results import http_get, serve_in_process

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
                http_get(base, "/")
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


def _pages(base: str, database: Path) -> list[str]:
    with open_store(database) as store:
        exp_id = next(a.exp_id for a in store.attempts() if a.params.get("exp.model") == "vgg16")
    return ["/", "/experiments?tag=v2", "/report", "/report?by=exp.model",
            "/compare?base=v1&new=v2", "/history", "/history/chart?index=0",
            f"/experiment/{exp_id}"]


def test_every_page_answers_escaped_and_read_only(served: tuple[str, Path]) -> None:
    base, database = served
    before = database.stat().st_mtime_ns
    for path in _pages(base, database):
        status, headers, body = http_get(base, path)
        assert status == 200, (path, body[-2000:])
        assert "default-src 'none'" in headers["content-security-policy"]
        assert "<table" in body, path
        assert HOSTILE not in body and "<script" not in body, path
    _, _, runs = http_get(base, "/")
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in runs
    _, _, page = http_get(base, "/experiment/hostile")
    assert "&lt;script&gt;" in page and HOSTILE not in page
    status, _, body = http_get(base, "/report?type=bogus")
    assert status == 400 and "unknown report type" in body
    status, _, _ = http_get(base, "/experiment/no-such-id")
    assert status == 404
    # A filter is a glob matched in Python, never SQL: this one just matches nothing.
    status, _, body = http_get(base, "/report?filter=" + urllib.parse.quote(
        "exp.model=' OR 1=1; DROP TABLE attempts; --"))
    assert status == 200 and "No ok experiments to report" in body
    assert database.stat().st_mtime_ns == before
    with open_store(database) as store:
        assert len(store.attempts()) == 7


def test_the_report_page_is_the_reports_engine(served: tuple[str, Path], dlbs_cli) -> None:
    base, database = served
    _, _, page = http_get(base, "/report?type=weak")
    cli = dlbs_cli("report", str(database), "--type", "weak", "--format", "html")
    assert cli.returncode == 0
    table = cli.stdout[cli.stdout.index('<section id="tables">'):cli.stdout.index("</section>")]
    assert table in page


def test_the_history_page_shows_each_configurations_runs(served: tuple[str, Path]) -> None:
    base, _ = served
    _, _, page = http_get(base, "/history")
    assert page.count('<td class="steady">steady</td>') + \
        page.count('<td class="too-few">too few</td>') >= 2
    _, _, chart = http_get(base, "/history/chart?index=0")
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


def _attempts(count: int, model: str = "resnet50", first: int = 0) -> list[Any]:
    from dlbs.results.store import Attempt

    return [Attempt(f"e{i}", 1, "ok", None, {"exp.model": model, "trial": i,
                                             "exp.framework": "pytorch"},
                    {"results.time_data": [1.0, 2.0, 3.0]}, None, {}, None,
                    "2026-01-01T10:00:00.000+00:00", "2026-01-01T10:01:00.000+00:00")
            for i in range(first, first + count)]


def test_a_report_of_many_rows_shows_its_first_and_gives_all_as_csv(tmp_path: Path) -> None:
    from dlbs.web.app import PAGE_ROWS

    database = tmp_path / "many.db"
    with open_store(database) as store:
        store.record_attempts(_attempts(PAGE_ROWS + 5))
    with serve_in_process(str(database)) as base:
        status, _, page = http_get(base, "/report?filter=exp.model%3Dresnet*")
        assert status == 200 and f"{PAGE_ROWS + 5} rows: the first {PAGE_ROWS}" in page
        assert page.count("<tr>") == PAGE_ROWS + 1
        status, headers, csv_text = http_get(base, "/report?filter=exp.model%3Dresnet*&format=csv")
        assert status == 200 and headers["content-type"].startswith("text/csv")
        assert len(csv_text.strip().splitlines()) == PAGE_ROWS + 5 + 1


def _concurrently(*calls: Callable[[], Any]) -> list[Any]:
    """Run each call in a thread of its own; their results (an exception is raised here)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [future.result(timeout=120) for future in futures]


@pytest.mark.parametrize("store_location", ["sqlite", "postgresql"], indirect=True)
def test_two_slow_requests_are_answered_at_once(store_location: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Two report pages are built at the same time: each waits for the other to start.

    Served one at a time, the first would wait at the barrier for a second that cannot start
    and the barrier would break (an error page); here both pass it. A quick page is answered
    while both are still being built.
    """
    import threading

    import dlbs.web.app

    with open_store(store_location) as store:
        store.record_attempts(_attempts(20))
    both = threading.Barrier(2, timeout=30)
    started = threading.Event()
    release = threading.Event()
    real = dlbs.web.app.build_report

    def slow_build(*args: Any, **kwargs: Any) -> Any:
        both.wait()             # raises BrokenBarrierError when the other never comes
        started.set()
        release.wait(timeout=30)
        return real(*args, **kwargs)

    monkeypatch.setattr(dlbs.web.app, "build_report", slow_build)
    with serve_in_process(store_location) as base:
        def quick_page() -> int:
            try:
                assert started.wait(timeout=30), "the two reports did not start together"
                return http_get(base, "/")[0]   # while both reports wait for `release`
            finally:
                release.set()

        first, second, runs_status = _concurrently(
            lambda: http_get(base, "/report?type=regular"),
            lambda: http_get(base, "/report?type=regular&by=exp.model,trial"),
            quick_page)
    assert not both.broken
    assert runs_status == 200
    for status, _, body in (first, second):
        assert status == 200 and "resnet50" in body, body[-2000:]


@pytest.mark.parametrize("store_location", ["sqlite", "postgresql"], indirect=True)
def test_a_kept_page_is_built_again_when_the_store_changes(store_location: str) -> None:
    with open_store(store_location) as store:
        store.record_attempts(_attempts(3))
    with serve_in_process(store_location) as base:
        pages = [http_get(base, "/report?format=csv")[2] for _ in range(2)]
        assert pages[0] == pages[1] and pages[0].count("resnet50") == 3
        with open_store(store_location) as store:
            store.record_attempts(_attempts(2, model="vgg16", first=3))
        _, _, page = http_get(base, "/report?format=csv")
        assert page.count("resnet50") == 3 and page.count("vgg16") == 2
        with open_store(store_location) as store:
            store.record_start("open", 1, {"exp.model": "alexnet"})
        assert http_get(base, "/")[2].count("<td>") > 0
        with open_store(store_location) as store:
            store.record_end("open", 1, "ok", results={"results.time_data": [1.0, 2.0]})
        _, _, page = http_get(base, "/report?format=csv")
        assert page.count("alexnet") == 1, page
