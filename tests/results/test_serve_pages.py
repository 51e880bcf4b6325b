"""`dlbs serve`'s History and Compare pages, and their bounds (issue 33 items 4, 5; 34.14).

A store of two models at two batches, nightly on two hosts, with one configuration planted
25% slower in the newest run. History: the regression comes first, with what a configuration
is, the grouping to choose, rounded numbers, and a chart with the window's band, the judged
run ringed and a marker per host; a refused grouping offers the one that works. Compare runs:
two tags picked, the U test's verdicts coloured and rounded, and every refusal with its way
out. Every table is paged, a query string is bounded, and heavy pages take turns: beyond the
queue, "busy" at once.
"""

from __future__ import annotations

import html
import random
import re
import threading
import urllib.parse
from pathlib import Path

import pytest
from helpers_results import browse, http_get, nightly_attempt, serve_in_process, table_cells

from dlbs.results.store import Attempt, open_store

MODELS = (("resnet18", 2294.0), ("vgg16", 6211.0))


def _nightly(days: int = 14, slow_day: int | None = 14) -> list[Attempt]:
    rng = random.Random(1)
    found = []
    for model, base in MODELS:
        for batch in (4, 16):
            for day in range(1, days + 1):
                value = base * batch / 4 * (1 + rng.gauss(0, 0.01))
                if (model, batch, day) == ("vgg16", 16, slow_day):
                    value *= 1.25
                found.append(nightly_attempt(model, day, value, batch=batch, samples=20,
                                             host="ws1" if day % 2 else "gpu8"))
    return found


@pytest.fixture(scope="module")
def nightly(tmp_path_factory: pytest.TempPathFactory) -> str:
    database = tmp_path_factory.mktemp("pages") / "results.db"
    with open_store(database) as store:
        store.record_attempts(_nightly())
    with serve_in_process(str(database)) as base:
        yield base


@pytest.fixture
def two_nights(tmp_path: Path) -> Path:
    """A small store: two nights of the four configurations."""
    database = tmp_path / "results.db"
    with open_store(database) as store:
        store.record_attempts(_nightly(days=2))
    return database


# -- History ---------------------------------------------------------------------------------

def test_the_history_page_shows_the_regression_first_and_says_what_it_groups(
        nightly: str) -> None:
    status, _, page = http_get(nightly, "/history")
    assert status == 200
    rows = table_cells(page, "history")
    assert rows[0][:2] == ["model", "replica batch"] and "host" in rows[0]
    assert rows[1][:2] == ["vgg16", "16"] and rows[1][-2] == "regression"
    assert '<td class="regression">regression</td>' in page
    # Rounded as reports round: four significant digits, no float tails.
    for row in rows[1:]:
        for cell in row[3:5]:
            assert re.fullmatch(r"-?\d+(\.\d+)?", cell) and len(cell.replace(".", "")) <= 5
    assert "a configuration is an experiment (its exp.id: every identity parameter) on one " \
           "device model" in page
    for key in ("exp.model", "exp.replica_batch", "env.host", "env.device_model"):
        assert f'name="by" value="{key}"' in page
    assert "1 regression</a>" in page and "3 steady</a>" in page


def test_a_grouping_that_mixes_experiments_offers_the_way_out(nightly: str) -> None:
    status, _, page = http_get(nightly, "/history?by=exp.model")
    assert status == 400
    assert "exp.replica_batch (2 values) also vary within a configuration" in page
    fix = re.search(r'Way out: <a href="/history\?([^"]+)">group by exp.model,'
                    r'exp.replica_batch</a>', page)
    assert fix, page[-3000:]
    status, _, fixed = http_get(nightly, "/history?" + html.unescape(fix.group(1)))
    assert status == 200 and "1 regression</a>" in fixed
    # Ticked boxes are the same grouping.
    status, _, ticked = http_get(nightly, "/history?by=exp.model&by=exp.replica_batch")
    assert status == 200 and table_cells(ticked, "history") == table_cells(fixed, "history")


def test_the_chart_shows_the_band_the_judged_run_and_the_hosts(nightly: str) -> None:
    _, _, page = http_get(nightly, "/history")
    link = re.search(r'<a href="/history/chart\?([^"]+)">chart</a>', page).group(1)
    status, _, chart = http_get(nightly, "/history/chart?" + html.unescape(link))
    assert status == 200
    svg = chart[chart.index("<svg"):chart.index("</svg>")]
    for legend in ("host ws1", "host gpu8", "window mean ± 3·std", "judged: regression"):
        assert legend in html.unescape(svg), legend
    assert "Judged: run nightly-14 (experiment id-vgg16-16, host gpu8" in chart
    points = table_cells(chart, "points")
    assert points[1][0] == "nightly-14" and points[1][-1] == "judged"
    assert points[2][-1] == "in the window" and points[1][1] == "gpu8"
    assert re.fullmatch(r"\d{5}", points[1][4]), points[1]   # 31041, not 31041.23...


def test_status_filters_and_bad_options(nightly: str) -> None:
    _, _, page = http_get(nightly, "/history?status=steady")
    assert [row[-2] for row in table_cells(page, "history")[1:]] == ["steady"] * 3
    for query, message in (("z=nan", "--z nan"), ("min_change=nan%25", "--min-change nan%"),
                           ("window=5000", "at most 1000"), ("metric=bogus", "--metric bogus"),
                           ("page=0", "not a page number"), ("status=bogus", "status 'bogus'")):
        status, _, body = http_get(nightly, "/history?" + query)
        assert status == 400 and message in html.unescape(body), (query, body[-1500:])
    status, _, body = http_get(nightly, "/history/chart?index=99")
    assert status == 404 and "no configuration of that number" in body


# -- Compare runs ----------------------------------------------------------------------------

def test_compare_picks_the_two_newest_tags_and_colours_the_significant(nightly: str) -> None:
    status, _, page = http_get(nightly, "/compare")
    assert status == 200
    assert 'name="base" list="run-tags" value="nightly-13"' in page
    assert 'name="new" list="run-tags" value="nightly-14"' in page
    assert '<option value="nightly-01">' in page
    rows = table_cells(page, "comparison")
    assert rows[0] == ["model", "replica batch", "BASE (ms)", "NEW (ms)", "change", "p-value",
                       "verdict"]
    assert rows[1][:2] == ["vgg16", "16"] and rows[1][-1] == "slower"
    assert re.fullmatch(r"\+2\d\.\d%", rows[1][4]) and float(rows[1][5]) < 0.01
    assert '<td class="slower">slower</td>' in page
    assert "the median batch time (ms) of each experiment&#39;s newest attempt" in page
    status, headers, csv_text = http_get(nightly, "/compare?base=nightly-13&new=nightly-14"
                                                  "&format=csv")
    assert status == 200 and headers["content-type"].startswith("text/csv")
    assert csv_text.splitlines()[0].startswith("model,replica_batch,base_ms,new_ms,change")


@pytest.mark.parametrize("query, message, fix", [
    ("base=nightly-13&new=nightly-99", "NEW: no attempt has the run tag &#39;nightly-99&#39;",
     "compare the two newest runs (nightly-13, nightly-14)"),
    ("base=nightly-13&new=nightly-14&by=exp.dtype", "",
     "compare these runs with the default options"),
    ("base=nightly-01&new=nightly-14&threshold=lots", "--threshold &#39;lots&#39;",
     "compare these runs with the default options"),
    ("base=nightly-01&new=nightly-14&alpha=2", "alpha 2.0 must be between 0 and 1",
     "compare the two newest runs"),
])
def test_compare_never_ends_in_a_dead_end(nightly: str, query: str, message: str,
                                          fix: str) -> None:
    status, _, page = http_get(nightly, "/compare?" + query)
    assert status == 400 and message in page
    assert 'name="base" list="run-tags"' in page        # the form stays
    link = re.search(r'Way out: <a href="/compare\?([^"]+)">' + re.escape(fix), page)
    assert link, page[-2000:]
    status, _, fixed = http_get(nightly, "/compare?" + html.unescape(link.group(1)))
    assert status == 200, fixed[-2000:]


def test_compare_offers_the_by_that_matches_two_different_sides(tmp_path: Path) -> None:
    database = tmp_path / "results.db"
    attempts = []
    for tag, day, sleep in (("v1", 1, 0.02), ("v2", 2, 0.022)):
        for batch in (4, 16):
            item = nightly_attempt("resnet18", day, 10.0 * batch, batch=batch, tag=tag,
                                   samples=20)
            attempts.append(Attempt(**{**item.__dict__,
                                       "params": {**item.params, "dummy.sleep": sleep}}))
    with open_store(database) as store:
        store.record_attempts(attempts)
    with serve_in_process(str(database)) as base:
        status, _, page = http_get(base, "/compare")
        assert status == 400 and "no experiment in common" in page
        link = re.search(r'Way out: <a href="/compare\?([^"]+)">compare --by '
                         r'exp.replica_batch</a>', page)
        assert link, page[-2000:]
        status, _, fixed = http_get(base, "/compare?" + html.unescape(link.group(1)))
        assert status == 200 and "2 matched: 2 same." in fixed
        assert "Not matched on dummy.sleep" in fixed


# -- bounds ----------------------------------------------------------------------------------

def test_every_table_is_paged(tmp_path: Path) -> None:
    database = tmp_path / "results.db"
    with open_store(database) as store:
        store.record_attempts([nightly_attempt(f"m{index:03d}", 1, 1.0 + index,
                                               tag=f"t{index:03d}") for index in range(250)])
    with serve_in_process(str(database)) as base:
        for path, table in (("/", "runs"), ("/experiments", "experiments"),
                            ("/history", "history")):
            _, _, first = http_get(base, path)
            assert len(table_cells(first, table)) == 101, path
            assert "rows 1–100 of 250" in first and 'rel="next"' in first, path
            _, _, last = http_get(base, path + ("&" if "?" in path else "?") + "page=3")
            assert len(table_cells(last, table)) == 51 and "rows 201–250 of 250" in last, path
            _, _, beyond = http_get(base, path + "?page=99")
            assert "rows 201–250 of 250" in beyond, path
        status, _, _ = http_get(base, "/history?filter=" + "x" * 9000)
        assert status == 414


def test_heavy_pages_take_turns_and_a_quick_page_never_waits(
        nightly: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """One heavy page at a time, none waiting: a second is "busy" at once, "/" answers."""
    import dlbs.web.app

    database = tmp_path / "results.db"
    with open_store(database) as store:
        store.record_attempts(_nightly(days=4))
    started, release = threading.Event(), threading.Event()
    real = dlbs.web.app.judge

    def slow_judge(*args, **kwargs):
        started.set()
        release.wait(timeout=30)
        return real(*args, **kwargs)

    monkeypatch.setattr(dlbs.web.app, "judge", slow_judge)
    with serve_in_process(str(database), heavy=1, waiting=0) as base:
        results: dict[str, tuple[int, dict[str, str], str]] = {}
        first = threading.Thread(target=lambda: results.update(first=http_get(base,
                                                                              "/history")))
        first.start()
        try:
            assert started.wait(timeout=30)
            status, headers, body = http_get(base, "/history?z=2")
            assert status == 503 and headers["retry-after"] == "2" and "ask again" in body
            assert http_get(base, "/")[0] == 200       # while the heavy page is still built
            assert http_get(base, "/experiments")[0] == 200
        finally:
            release.set()
            first.join(timeout=60)
        assert results["first"][0] == 200
        assert http_get(base, "/history?z=2")[0] == 200    # its turn now


def test_other_thresholds_judge_the_kept_history_again(nightly: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import dlbs.history

    http_get(nightly, "/history?window=10")
    calls = []
    real = dlbs.history.build_history
    monkeypatch.setattr(dlbs.history, "build_history",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    for z in ("2", "2.5", "4"):
        status, _, page = http_get(nightly, f"/history?window=10&z={urllib.parse.quote(z)}")
        assert status == 200 and f"z {z}," in page
    assert calls == []


# -- 34.16: what --host exposes; no request half-sent for ever --------------------------------

@pytest.mark.parametrize("host, said", [
    ("127.0.0.1", None), ("::1", None), ("localhost", None), ("127.0.0.2", None),
    ("0.0.0.0", "listens on every network interface"), ("::", "every network interface"),
    ("10.0.0.5", "listens on 10.0.0.5, an address other machines may reach"),
    ("bench.lab", "a name: whatever addresses bench.lab resolves to"),
])
def test_what_an_address_exposes(host: str, said: str | None) -> None:
    from dlbs.cli.serve import exposure

    found = exposure(host)
    assert (found is None) if said is None else (said in found)


def test_serving_beyond_this_machine_says_what_it_exposes(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys
    import time

    from tests.report.conftest import REPO

    database = tmp_path / "results.db"
    with open_store(database) as store:
        store.record_attempts(_nightly(days=2))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # A log folder is served through its results.db, as reports read it.
    server = subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "serve", str(tmp_path),
                               "--host", "0.0.0.0", "--port", str(port)], cwd=REPO,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                assert http_get(f"http://127.0.0.1:{port}", "/")[0] == 200
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    assert f"dlbs serve: serving {database}, the results database of {tmp_path}" in err
    assert f"dlbs serve: warning: --host 0.0.0.0 listens on every network interface of this " \
           f"machine: anyone who can reach port {port} there reads every result, log, trace " \
           f"and parameter of {database}, with no password" in err


def _wait_closed(connection, seconds: float) -> float:
    """Seconds until the server closed `connection` (reading nothing more)."""
    import time

    began = time.monotonic()
    connection.settimeout(seconds)
    while connection.recv(65536):
        pass
    return time.monotonic() - began


@pytest.mark.parametrize("sent", [b"", b"GET / HTTP/1.1\r\n", b"GET / HTTP/1.1\r\nHost: x\r\n",
                                  b"GE"])
def test_a_half_sent_request_is_closed_after_the_head_timeout(two_nights: Path,
                                                              sent: bytes) -> None:
    import socket

    with serve_in_process(str(two_nights), head_timeout=1.0) as base:
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as connection:
            connection.sendall(sent)
            assert _wait_closed(connection, 10) < 5
        # After a whole request on a kept-alive connection, a half-sent next one too.
        with socket.create_connection(("127.0.0.1", port)) as connection:
            connection.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            connection.settimeout(10)
            assert connection.recv(65536).startswith(b"HTTP/1.1 200")
            connection.sendall(b"GET / HTTP/1.1\r\nHost")
            assert _wait_closed(connection, 10) < 5


def test_a_slow_but_whole_request_is_answered(two_nights: Path) -> None:
    import socket
    import time

    with serve_in_process(str(two_nights), head_timeout=2.0) as base:
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as connection:
            for part in (b"GET / HT", b"TP/1.1\r\nHo", b"st: x\r\n", b"\r\n"):
                connection.sendall(part)
                time.sleep(0.3)
            connection.settimeout(10)
            assert connection.recv(65536).startswith(b"HTTP/1.1 200")


def test_a_folder_without_a_store_says_what_to_serve(tmp_path: Path, dlbs_cli) -> None:
    from tests.cli.test_plan_cli import assert_one_error_line

    result = dlbs_cli("serve", str(tmp_path))
    assert_one_error_line(result, f"{tmp_path} is a folder with no results database",
                          "hint: serve a results database: dlbs serve FOLDER/results.db")
    assert "dlbs run" not in result.stderr and "runtime.results_db" not in result.stderr
    for name in ("a", "b"):
        with open_store(tmp_path / name / "results.db") as store:
            store.record_attempts(_nightly(days=1))
    result = dlbs_cli("serve", str(tmp_path))
    assert_one_error_line(result, "holds 2 results databases", "dlbs results copy")


def test_a_taken_port_is_one_error_line(two_nights: Path, dlbs_cli) -> None:
    import socket

    from tests.cli.test_plan_cli import assert_one_error_line

    database = two_nights
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = dlbs_cli("serve", str(database), "--port", str(port))
    assert_one_error_line(result, f"cannot listen on 127.0.0.1:{port}: Address already in use")


# -- 33.7: an experiment's page shows every attempt's trace -----------------------------------

@pytest.mark.slow
def test_the_experiment_page_shows_an_earlier_attempts_trace(tmp_path: Path) -> None:
    from tests.report.conftest import dummy_run

    logs = tmp_path / "logs"
    sweep = ("-P", "exp.model=resnet50", "-P", "exp.num_batches=3")
    for tag, level in (("v1", "step"), ("v2", "none")):
        result = dummy_run(logs, *sweep, "-P", f"exp.trace_level={level}",
                           "-P", f"runtime.run_tag={tag}")
        assert result.returncode == 0, result.stderr
    with open_store(logs / "results.db") as store:
        [first, second] = store.attempts()
    assert first.exp_id == second.exp_id and first.results.get("results.trace_file")
    with serve_in_process(str(logs / "results.db")) as base:
        status, _, page = http_get(base, f"/experiment/{first.exp_id}")
        assert status == 200
        assert '<pre class="trace" id="trace-1">' in page and "attempt(s) 2 ran without a trace" \
            in page
        assert "Results of attempt 2" in page
        status, _, chosen = http_get(base, f"/experiment/{first.exp_id}?attempt=1")
        assert status == 200 and "Results of attempt 1" in chosen
        status, _, missing = http_get(base, f"/experiment/{first.exp_id}?attempt=9")
        assert status == 404 and "its attempts: 1, 2" in missing


@pytest.mark.browser
@pytest.mark.slow
def test_the_pages_render_in_chromium(nightly: str, tmp_path: Path) -> None:
    refused = ("/history?by=exp.model", "/compare?base=nightly-13&new=nightly-99")
    drawn = browse(nightly, {"/history": "#history td.regression", refused[0]: "p.fix a",
                             "/history/chart?index=3": "#chart svg",
                             "/compare": "#comparison td.slower", refused[1]: "p.fix a"},
                   tmp_path / "profile", refused)
    assert "judged: regression" in drawn["/history/chart?index=3"]


# -- 33.8: docs/results.md lists every page and the parameters it reads -----------------------

def test_the_docs_list_every_page_and_its_parameters() -> None:
    from tests.report.conftest import REPO

    docs = (REPO / "docs" / "results.md").read_text()
    table = docs[docs.index("| page | shows | query parameters |"):]
    table = table[:table.index("\n\n")]
    source = (REPO / "dlbs" / "web" / "app.py").read_text()
    asked = set(re.findall(r'(?:query|query_params|request\.query_params)\.get(?:list)?\("(\w+)"',
                           source))
    asked |= set(re.findall(r'query\["(\w+)"\]', source)) | set(re.findall(
        r'form\["(\w+)"\]', source)) | {"page"}
    documented = set(re.findall(r"`(\w+)(?:=[^`]*)?`", table))
    assert asked <= documented, asked - documented
    for path in set(re.findall(r'Route\("([^"{]+)', source)):
        assert f"`{path.rstrip('/') or '/'}" in table, path
