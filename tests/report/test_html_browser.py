"""The HTML report: one self-contained page, loaded in a real headless Chromium.

The page comes from a real sweep of the dummy backend (a failure and the resource monitor
included). Chromium (Debian's, installed by .ci/services/chromium.sh) loads it over the
DevTools pipe (cdp.py): no console error or exception, no request besides the page itself,
the tables and charts are there, and a screenshot of the whole page is not blank.
"""

from __future__ import annotations

import base64
import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dlbs.report import build_report
from dlbs.report.html import render_html
from tests.report.cdp import Browser, is_problem
from tests.report.conftest import REPO, dummy_run, records
from tests.results.helpers_results import experiment


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`dlbs report --format html` of a weak-scaling sweep with one failed experiment."""
    root = tmp_path_factory.mktemp("html")
    result = dummy_run(root / "logs", "-V", 'exp.gpus=["0", "0,1"]',
                       "-V", 'exp.model=["resnet50", "vgg16", "alexnet"]',
                       "-P", "exp.replica_batch=16", "-P", "exp.num_batches=10",
                       "-P", "dummy.sleep=0.01", "-P", "monitor.frequency=0.02",
                       "-E", '{"condition": {"exp.model": "alexnet"}, '
                             '"parameters": {"dummy.fail": "exit"}}')
    # The failures make the sweep exit 1; the others ran.
    assert result.returncode == 1 and "2 failure, 4 ok" in result.stderr, result.stderr
    out = root / "report.html"
    done = subprocess.run([sys.executable, "-m", "dlbs.cli.main", "report",
                           str(root / "logs" / "results.db"), "--type", "weak",
                           "--format", "html", "-o", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return out


def test_the_page_is_self_contained(page: Path) -> None:
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html
    # Nothing to fetch: no scripts, stylesheets, images or frames from anywhere.
    assert not re.search(r"<(script|link|img|iframe|object|embed)\b", html)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "@import" not in html and not re.search(r"url\((?!#)", html)   # only url(#id)
    for text in ("Weak scaling (same replica batch)", "efficiency (%), by number of GPUs",
                 "Resource use", "Environment", "Failures",
                 "dummy backend: requested failure (--fail exit)", "ddof=1"):
        assert text in html, text


def test_values_are_escaped() -> None:
    hostile = experiment("<script>alert(1)</script>", 1, 8, 10.0, exp_id="x",
                         **{"results.time_data": [10.0, 10.0]})
    html = render_html(build_report(records(hostile), "regular"))
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.browser
@pytest.mark.slow
def test_the_page_renders_in_chromium_without_errors(page: Path, tmp_path: Path) -> None:
    url = page.resolve().as_uri()
    with Browser(tmp_path / "profile") as browser:
        session = browser.open_page(url)

        def evaluate(expression: str) -> Any:
            reply = browser.send("Runtime.evaluate", session, expression=expression,
                                 returnByValue=True)
            return reply["result"].get("value")

        assert evaluate("document.title") == "dlbs: Weak scaling (same replica batch)"
        assert evaluate("document.querySelectorAll('main table').length") >= 6
        assert evaluate("document.querySelectorAll('figure svg').length") == 1
        assert evaluate("document.querySelector('figure svg').getBBox().width") > 100
        assert "requested failure" in evaluate("document.querySelector('#failures').innerText")
        height = evaluate("document.documentElement.scrollHeight")
        shot = browser.send("Page.captureScreenshot", session, format="png",
                            captureBeyondViewport=True)
        events = list(browser.events)
    problems = [event for event in events if is_problem(event)]
    assert problems == []
    requested = [e["params"]["request"]["url"] for e in events
                 if e.get("method") == "Network.requestWillBeSent"]
    assert requested == [url]                         # the page itself, nothing else
    image = base64.b64decode(shot["data"])
    (tmp_path / "report.png").write_bytes(image)
    from PIL import Image

    with Image.open(io.BytesIO(image)) as picture:
        assert picture.height >= height > 800
        colours = picture.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 50                           # text, tables and a chart: not blank
