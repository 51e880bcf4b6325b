"""`dlbs report`, `compare` and `plot` options, in-process and as a user runs them."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest

from dlbs.cli import main as cli_main
from tests.report.conftest import REPO
from tests.results.helpers_results import experiment, write_log


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """Two models x two batches x a user's axis, and an experiment run twice."""
    for model in ("resnet50", "vgg16"):
        for batch in (32, 64):
            for trial in (1, 2):
                values = experiment(model, 1, batch, batch * (2.0 if model == "vgg16" else 1.0)
                                    + trial, exp_id=f"{model}-{batch}-{trial}", trial=trial)
                write_log(tmp_path / f"{model}_{batch}_{trial}.log", values)
    again = experiment("resnet50", 1, 32, 40.0, exp_id="resnet50-32-1", trial=1,
                       end_time="2030-01-01T00:00:00+00:00")
    write_log(tmp_path / "resnet50_32_1.attempt2.log", again)
    return tmp_path


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_report_options_in_process(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["report", str(logs), "--format", "csv"]) == 0
    rows = _csv(capsys.readouterr().out)
    assert len(rows) == 8 and {row["trial"] for row in rows} == {"1", "2"}
    twice = next(r for r in rows if r["model"] == "resnet50" and r["replica_batch"] == "32"
                 and r["trial"] == "1")
    # Issue 23: the newest run, never the mean of both (it was 36.5, (33 + 40) / 2).
    assert (twice["time_ms"], twice["run"], twice["runs"]) == ("40.0", "2", "2")
    assert twice["notes"].startswith('["runs disagree: batch time (ms) 33 (run 1), 40 (run 2)')

    assert cli_main.main(["report", str(logs), "--format", "csv", "--latest",
                          "--filter", "model=resnet50", "--filter", "trial=1",
                          "--columns", "time,results.throughput"]) == 0
    rows = _csv(capsys.readouterr().out)
    assert [(r["replica_batch"], r["time_ms"], r["runs"]) for r in rows] == [
        ("32", "40.0", "1"), ("64", "65.0", "1")]

    assert cli_main.main(["report", str(logs), "--by", "exp.model"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("dlbs: error: rows keyed by exp.model would combine different "
                            "experiments: exp.replica_batch (2 values), trial (2 values)")

    assert cli_main.main(["report", str(logs), "--type", "pivot", "--rows", "exp.model,trial",
                          "--cols", "exp.replica_batch", "--value", "time",
                          "--latest"]) == 0
    text = capsys.readouterr().out
    assert "batch time (ms), by replica batch" in text
    table = text.split("batch time (ms), by replica batch\n", 1)[1].splitlines()
    assert table[0].split() == ["model", "trial", "32", "64"]
    assert table[2].split() == ["resnet50", "1", "40", "65"]


def test_report_writes_html_to_a_file(logs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "report.html"
    assert cli_main.main(["report", str(logs), "--format", "html", "-o", str(out)]) == 0
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "vgg16" in html


@pytest.mark.parametrize("arguments, message", [
    (["report", "{logs}", "--filter", "nothing"], "--filter 'nothing' is not KEY=PATTERN"),
    (["report", "{logs}", "--columns", "bogus"], "no experiment has results.bogus"),
    (["report", "{logs}", "--type", "pivot"], "--type pivot needs --rows KEY"),
    (["report", "{logs}", "--value", "time"], "belong to --type pivot"),
    (["plot", "{logs}", "-o", "{tmp}/x.png", "--preset", "weak", "--filter", "model=none*"],
     "nothing to plot"),
])
def test_errors_are_one_line(logs: Path, tmp_path: Path, arguments: list[str],
                             message: str) -> None:
    places = {"{logs}": str(logs)}
    argv = [places.get(a, a.replace("{tmp}", str(tmp_path))) for a in arguments]
    result = subprocess.run([sys.executable, "-m", "dlbs.cli.main", *argv], cwd=REPO,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, result.stderr
    first, *rest = result.stderr.splitlines()
    assert first.startswith("dlbs: error: ") and message in first, result.stderr
    assert all(line.startswith("hint: ") for line in rest) and "Traceback" not in result.stderr


def test_command_modules_import_light() -> None:
    # `dlbs --help` and argument parsing must not pay for matplotlib, SciPy or numpy.
    code = ("import sys, dlbs.cli.compare, dlbs.cli.plot, dlbs.cli.report; "
            "heavy = {'matplotlib', 'scipy', 'numpy', 'sqlite3'} & set(sys.modules); "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


def test_help_lists_the_new_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli_main.main(["--help"])
    out = capsys.readouterr().out
    assert "compare" in out and "plot" in out


