"""Issue 34, item 9: chart labels are text, never mathtext.

A model, run tag or title such as `$x^{$` ended `dlbs plot` and `dlbs report --format html`
in a matplotlib parse error, and `dlbs serve` answered 500 for every report and history
page of that store. Each label is drawn as written: the SVG holds the text itself.
"""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from dlbs.cli.main import main
from dlbs.results.store import Attempt, open_store
from tests.results.helpers_results import http_get, nightly_attempt, serve_in_process

# Broken mathtext, valid mathtext (which must show as written too), lone and paired dollars.
LABELS = ["$x^{$", "$\\frac{", "$\\mathrm{ok}$", "$$", "a$b$c", "\\$x$"]


def _store(path: Path, label: str) -> Path:
    """Attempts of model `label` on 1 and 2 GPUs, over three run tags that hold it too."""
    attempts = []
    for gpus in (1, 2):
        for day in (1, 2, 3):
            item = nightly_attempt(label, day, 10.0 + day, tag=f"{label}-{day}",
                                   exp_id=f"id-{gpus}")
            params = {**item.params, "exp.num_gpus": gpus, "exp.effective_batch": 32 * gpus,
                      "exp.gpus": ",".join(map(str, range(gpus)))}
            attempts.append(Attempt(**{**item.__dict__, "params": params}))
    with open_store(path) as store:
        store.record_attempts(attempts)
    return path


@pytest.mark.parametrize("label", LABELS)
def test_plot_and_the_html_report_draw_labels_as_text(label: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    database = _store(tmp_path / "results.db", label)
    for argv in (["--preset", "weak"], ["--x", "exp.num_gpus", "--y", "results.time",
                                        "--series", "exp.model"],
                 ["--preset", "weak", "--title", label]):
        out = tmp_path / "chart.svg"
        assert main(["plot", str(database), *argv, "-o", str(out)]) == 0, capsys.readouterr()
        assert html.escape(label, quote=False) in out.read_text(), argv
        png = tmp_path / "chart.png"
        assert main(["plot", str(database), *argv, "-o", str(png)]) == 0, capsys.readouterr()
    capsys.readouterr()
    assert main(["report", str(database), "--type", "weak", "--format", "html"]) == 0
    page = capsys.readouterr().out
    assert "<svg" in page and html.escape(label, quote=False) in page


def test_a_user_meets_no_traceback(dlbs_cli, tmp_path: Path) -> None:
    database = _store(tmp_path / "results.db", LABELS[0])
    result = dlbs_cli("plot", str(database), "--preset", "weak", "-o", str(tmp_path / "c.png"))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize("label", LABELS[:2])
def test_serve_draws_labels_as_text(label: str, tmp_path: Path) -> None:
    database = _store(tmp_path / "results.db", label)
    with serve_in_process(str(database)) as base:
        for path in ("/report", "/report?type=weak", "/history", "/history/chart?index=0",
                     "/compare", "/experiment/id-1"):
            status, _, body = http_get(base, path)
            assert status == 200, (path, body[-1500:])
        _, _, chart = http_get(base, "/history/chart?index=0")
        assert html.escape(f"{label}-3", quote=False) in chart
