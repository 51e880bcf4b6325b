"""docs/team.md, end to end: two hosts, one PostgreSQL, a copied SQLite, a caught slowdown.

The walkthrough as a team lives it, with real `dlbs run`s of the dummy backend:
- a fresh PostgreSQL database, made by this test and dropped after it; the password in a
  pgpass file (`PGPASSFILE`), never in the URL the commands are given;
- two hosts, `ws1` and `gpu8`: each `dlbs run` in a UTS namespace of its own
  (`unshare --uts`, the host name set there), so dlbs records the host it really reads;
- a laptop that ran without the store (its SQLite `results.db`), joined with `dlbs results
  copy` as team.md says;
- gpu8's nightly job: four nights under their tags, the fourth with one configuration
  (vgg16) planted twice as slow by a changed backend (`dummy.bench_path`, a host parameter:
  the experiment stays the same, as when a framework's new commit slows a model);
- `dlbs history --check` fails the night and names the configuration and the run;
- `dlbs serve` over the store, in headless Chromium: every run attributed to its host, the
  regression first on the History page and in red, its chart with the hosts and the window's
  band, and Compare runs putting last night against tonight with the slowdown significant.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_results import browse, http_get, postgres_url, serve_in_process, table_cells

from tests.report.conftest import REPO

pytestmark = [pytest.mark.postgres, pytest.mark.browser, pytest.mark.slow]

SWEEP = ("-P", "exp.framework=dummy", "-V", 'exp.model=["resnet50", "vgg16"]',
         "-P", "exp.num_batches=8", "-P", "exp.num_warmup_batches=1", "-P", "dummy.sleep=0.05")
SLOWDOWN = 2.0
NIGHTS = ("nightly-01", "nightly-02", "nightly-03", "nightly-04")


@pytest.fixture
def team_store(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """(the store's URL without a password, the environment with its PGPASSFILE)."""
    import psycopg

    admin = postgres_url()
    parts = urllib.parse.urlsplit(admin)
    name = f"dlbs_team_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"{parts.hostname}:{parts.port}:{name}:{parts.username}:"
                        f"{urllib.parse.unquote(parts.password or '')}\n")
    passfile.chmod(0o600)
    environment = {key: value for key, value in os.environ.items() if key != "PGPASSWORD"}
    environment.update(PGPASSFILE=str(passfile), PYTHONPATH=str(REPO))
    try:
        yield f"postgresql://{parts.username}@{parts.hostname}:{parts.port}/{name}", environment
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _on(host: str, environment: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    """`dlbs ARGV` run on `host`: a UTS namespace whose host name is `host`."""
    return subprocess.run(["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host,
                           sys.executable, "-m", "dlbs.cli.main", *argv], cwd=REPO,
                          env=environment, capture_output=True, text=True, timeout=600,
                          check=False)


def _slow_backend(folder: Path) -> Path:
    """The dummy backend with every batch SLOWDOWN times as long (a 'new commit')."""
    backend = folder / "dummy_benchmarks"
    shutil.copytree(REPO / "python" / "dummy_benchmarks", backend,
                    ignore=shutil.ignore_patterns("__pycache__"))
    source = (backend / "benchmarks.py").read_text()
    assert source.count("        time.sleep(seconds)\n") == 1
    (backend / "benchmarks.py").write_text(source.replace(
        "        time.sleep(seconds)\n", f"        time.sleep(seconds * {SLOWDOWN})\n"))
    return backend


def test_the_team_walkthrough(team_store: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    store, environment = team_store
    password = urllib.parse.unquote(urllib.parse.urlsplit(postgres_url()).password or "")
    # 2. Every host points at it: ws1 writes the store directly, once.
    ws1 = _on("ws1", environment, "run", *SWEEP, "-P", f"runtime.results_db={store}",
              "-P", "runtime.run_tag=ws1-manual", "-P", f"exp.log_dir={tmp_path / 'ws1'}")
    assert ws1.returncode == 0, ws1.stderr
    # A laptop that ran without the store joins later (its SQLite, copied as team.md says).
    laptop = _on("laptop", environment, "run", *SWEEP, "-P", "runtime.run_tag=laptop-1",
                 "-P", f"exp.log_dir={tmp_path / 'laptop'}")
    assert laptop.returncode == 0, laptop.stderr
    copy = _on("laptop", environment, "results", "copy", str(tmp_path / "laptop" / "results.db"),
               store)
    assert copy.returncode == 0 and "copied 2 attempt(s)" in copy.stderr, copy.stderr
    again = _on("laptop", environment, "results", "copy",
                str(tmp_path / "laptop" / "results.db"), store)
    assert again.returncode == 0 and "copied 0 attempt(s)" in again.stderr, again.stderr
    # 4. The nightly gate on gpu8: the fourth night's vgg16 runs a backend twice as slow.
    slow = _slow_backend(tmp_path / "new-commit")
    for night in NIGHTS:
        planted = ["-E", '{"condition": {"exp.model": "vgg16"}, "parameters": '
                   f'{{"dummy.bench_path": "{slow}"}}}}'] if night == NIGHTS[-1] else []
        run = _on("gpu8", environment, "run", *SWEEP, *planted,
                  "-P", f"runtime.results_db={store}", "-P", f"runtime.run_tag={night}",
                  "-P", f"exp.log_dir={tmp_path / 'nightly' / night}")
        assert run.returncode == 0 and "2 ok" in run.stderr, run.stderr
        assert password not in run.stdout + run.stderr
        if night != NIGHTS[-1]:
            gate = _on("gpu8", environment, "history", store, "--check", "--filter",
                       "env.host=gpu8", "--min-change", "30%")
            assert gate.returncode == 0, gate.stdout + gate.stderr   # steady or too few
    gate = _on("gpu8", environment, "history", store, "--check", "--filter", "env.host=gpu8",
               "--window", "20", "--z", "3", "--min-change", "30%")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "1 regression(s), 0 failed" in gate.stderr
    [regressed] = [line for line in gate.stdout.splitlines() if line.endswith("regression")]
    assert regressed.split()[0] == "vgg16" and "nightly-04" in regressed
    [steady] = [line for line in gate.stdout.splitlines() if line.startswith("resnet50")]
    assert steady.endswith("steady")
    # Every host's runs count in the history (ws1, the laptop, gpu8), the regression too.
    everyone = _on("ws1", environment, "history", store, "--check", "--min-change", "30%")
    assert everyone.returncode == 1 and "1 regression(s)" in everyone.stderr
    # Compare on the command line: two run tags of the one store.
    compared = _on("ws1", environment, "compare", store, "--tags", NIGHTS[-2], NIGHTS[-1])
    assert compared.returncode == 1, compared.stderr
    [slower] = [line for line in compared.stdout.splitlines() if "SLOWER" in line]
    assert slower.split()[0] == "vgg16"
    _dashboard(store, environment, tmp_path, password)


def _dashboard(store: str, environment: dict[str, str], tmp_path: Path, password: str) -> None:
    """3. Looking at it: `dlbs serve` over the store, its pages in headless Chromium."""
    os.environ["PGPASSFILE"] = environment["PGPASSFILE"]
    try:
        with serve_in_process(store) as base:
            _, _, runs = http_get(base, "/")
            hosts = {row[0]: row[1] for row in table_cells(runs, "runs")[1:]}
            assert hosts == {"ws1-manual": "ws1", "laptop-1": "laptop",
                             **{night: "gpu8" for night in NIGHTS}}, hosts
            _, _, history = http_get(base, "/history")
            rows = table_cells(history, "history")
            assert rows[1][0] == "vgg16" and rows[1][-2] == "regression", rows[:3]
            chart_link = re.search(r'<a href="/history/chart\?([^"]+)">chart</a>',
                                   history).group(1)
            chart_path = "/history/chart?" + html.unescape(chart_link)
            _, _, chart = http_get(base, chart_path)
            assert "Judged: run nightly-04" in chart and "host gpu8" in chart
            _, _, compared = http_get(base, "/compare")
            assert 'value="nightly-03"' in compared and 'value="nightly-04"' in compared
            [slower] = [row for row in table_cells(compared, "comparison")[1:]
                        if row[-1] == "slower"]
            assert slower[0] == "vgg16"
            # The judged run's experiment (the chart's table, newest first): its log.
            judged = re.search(r'href="/experiment/([^"]+)"', chart).group(1)
            status, _, experiment = http_get(base, "/experiment/" + judged)
            assert status == 200 and '<pre id="log">' in experiment
            for page in (runs, history, chart, compared, experiment):
                assert password not in page
            drawn = browse(base, {"/": "#runs td", "/history": "#history td.regression",
                                  chart_path: "#chart svg",
                                  "/compare": "#comparison td.slower"}, tmp_path / "profile")
            assert "host gpu8" in drawn[chart_path] and "window mean" in drawn[chart_path]
    finally:
        os.environ.pop("PGPASSFILE", None)


