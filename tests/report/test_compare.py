"""`dlbs compare`: matching, significance, verdicts and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dlbs.errors import ResultsError
from dlbs.report.compare import compare, parse_threshold
from dlbs.report.render_compare import render_comparison
from dlbs.report.select import Filter
from tests.report.conftest import dummy_run, record
from tests.results.helpers_results import experiment

RNG = np.random.default_rng(11)


def measured(model: str, median: float, exp_id: str | None = None, status: str = "ok",
             n: int = 60, **extra: Any) -> dict[str, Any]:
    """An experiment with `n` per-batch times around `median` (2% noise)."""
    values = experiment(model, 1, 32, None, exp_id=exp_id or f"id-{model}", status=status,
                        **extra)
    if status == "ok":
        values["results.time_data"] = list(RNG.normal(median, median * 0.02, n))
    return values


def test_verdicts() -> None:
    base = [record(measured(m, 100.0)) for m in ("a", "b", "c", "d", "e")]
    base.append(record(measured("f", 100.0, status="failure")))
    new = [record(measured("a", 100.0)),             # same
           record(measured("b", 110.0)),             # 10% slower
           record(measured("c", 90.0)),              # 10% faster
           record(measured("d", 100.0, status="failure")),
           record(measured("e", 115.0, n=3)),        # beyond 3%, too few batches to test
           record(measured("f", 100.0)),
           record(measured("g", 100.0))]             # only in NEW
    comparison = compare(base, new)
    verdicts = {match.shown[0]: match.verdict for match in comparison.matches}
    assert verdicts == {"a": "same", "b": "slower", "c": "faster", "d": "now fails",
                        "e": "untested", "f": "now ok"}
    assert sorted(m.shown[0] for m in comparison.regressions) == ["b", "d"]
    slower = next(m for m in comparison.matches if m.shown[0] == "b")
    assert slower.change == pytest.approx(0.10, abs=0.02) and slower.p_value < 1e-6
    assert comparison.new_only == [("g",)] and comparison.base_only == []


def test_a_large_change_without_significance_is_not_reported() -> None:
    rng = np.random.default_rng(3)
    noisy = [float(x) for x in rng.uniform(50.0, 150.0, 8)]
    shifted = [x * 1.05 for x in rng.permutation(noisy)]   # 5% on a +-50% spread of 8 batches
    base = [record(dict(experiment("a", 1, 32, None, exp_id="x"),
                        **{"results.time_data": noisy}))]
    new = [record(dict(experiment("a", 1, 32, None, exp_id="x"),
                       **{"results.time_data": shifted}))]
    [match] = compare(base, new).matches
    assert abs(match.change) > 0.03 and match.verdict == "not significant"


def test_matching_ignores_parameters_one_side_lacks() -> None:
    # NEW was made by a dlbs that added a parameter: ids differ, the experiments match.
    base = [record(measured("a", 100.0, exp_id="old-id"))]
    new = [record(measured("a", 100.0, exp_id="new-id", **{"exp.new_knob": 1}))]
    [match] = compare(base, new).matches
    assert match.verdict == "same"


def test_a_parameter_that_differs_needs_by() -> None:
    base = [record(measured(m, 100.0, exp_id=f"b{m}", **{"dummy.sleep": 0.02})) for m in "ab"]
    new = [record(measured(m, 110.0, exp_id=f"n{m}", **{"dummy.sleep": 0.022})) for m in "ab"]
    with pytest.raises(ResultsError, match=r"no experiment in common \(dummy.sleep: '0.02' vs "
                                           r"'0.022'\)") as error:
        compare(base, new)
    assert "--by" in (error.value.hint or "")
    comparison = compare(base, new, by=["exp.model"])
    assert [m.verdict for m in comparison.matches] == ["slower", "slower"]
    text = render_comparison(comparison, "text")
    assert "Not matched on dummy.sleep: BASE has 0.02, NEW has 0.022." in text


def test_by_refuses_pairs_of_different_experiments() -> None:
    base = [record(measured("a", 100.0, exp_id=f"t{t}", trial=t)) for t in (1, 2)]
    with pytest.raises(ResultsError, match="in BASE, trial also vary"):
        compare(base, base, by=["exp.model"])


def test_filters_and_thresholds() -> None:
    base = [record(measured(m, 100.0)) for m in ("a", "b")]
    new = [record(measured(m, 105.0)) for m in ("a", "b")]
    assert {m.verdict for m in compare(base, new).matches} == {"slower"}
    assert {m.verdict for m in compare(base, new, threshold=0.08).matches} == {"same"}
    only_a = compare(base, new, filters=[Filter.parse("model=a")])
    assert [m.shown for m in only_a.matches] == [("a",)]
    assert parse_threshold("3%") == 0.03 and parse_threshold("0.05") == 0.05
    with pytest.raises(ResultsError, match="is not a percentage"):
        parse_threshold("three")


def test_formats() -> None:
    base = [record(measured(m, 100.0)) for m in ("a", "b")]
    new = [record(measured("a", 111.0)), record(measured("c", 100.0))]
    comparison = compare(base, new)
    document = json.loads(render_comparison(comparison, "json"))
    assert (document["format"], document["version"], document["regressions"]) == (
        "dlbs-comparison", 1, 1)
    assert document["matches"][0]["verdict"] == "slower"
    assert document["base_only"] == [{"model": "b"}] and document["new_only"] == [
        {"model": "c"}]
    text = render_comparison(comparison, "text")
    assert text.startswith("Comparison of the median batch time (ms) of each experiment's newest "
                           "attempt: 1 matched: 1 slower; 1 only in BASE; 1 only in NEW.")
    assert "SLOWER" in text and "Only in BASE (1):" in text
    assert "| model | BASE (ms) | NEW (ms) | change | p-value | verdict |" in \
        render_comparison(comparison, "markdown")
    assert render_comparison(comparison, "csv").splitlines()[0] == (
        "model,base_ms,new_ms,change,p_value,verdict,base_exp_id,new_exp_id")


# -- real runs of the dummy backend ---------------------------------------------------------

SWEEP = ["-V", 'exp.model=["resnet50", "vgg16"]', "-P", "exp.num_batches=40"]


# The sweeps' batch times are what the comparison judges: their tests run alone on the
# machine, and the fixture is made within the first of them (tests/parallel.py).
@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three sweeps: a base, the same setting again, and one 10% slower per batch."""
    root = tmp_path_factory.mktemp("compare")
    folders = {}
    for name, sleep in (("base", "0.02"), ("again", "0.02"), ("slower", "0.022")):
        folders[name] = root / name
        result = dummy_run(folders[name], *SWEEP, "-P", f"dummy.sleep={sleep}")
        assert result.returncode == 0, result.stderr
    return folders


@pytest.mark.slow
@pytest.mark.serial
def test_a_planted_ten_percent_slowdown_is_found(runs: dict[str, Path], dlbs: Any) -> None:
    result = dlbs("compare", str(runs["base"] / "results.db"), str(runs["slower"]),
                  "--by", "exp.model")
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("Comparison of the median batch time (ms) of each "
                                    "experiment's newest attempt: 2 matched: 2 slower.")
    rows = [line for line in result.stdout.splitlines() if line.startswith(("resnet", "vgg"))]
    assert len(rows) == 2
    for line in rows:
        change = float(line.split()[3].rstrip("%"))
        assert 7.0 < change < 13.0 and line.endswith("SLOWER"), line


@pytest.mark.slow
@pytest.mark.serial
def test_two_runs_of_the_same_setting_are_the_same(runs: dict[str, Path], dlbs: Any) -> None:
    result = dlbs("compare", str(runs["base"]), str(runs["again"] / "results.db"),
                  "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert len(document["matches"]) == 2 and document["regressions"] == 0
    assert {m["verdict"] for m in document["matches"]} <= {"same", "not significant"}


@pytest.mark.slow
@pytest.mark.serial
def test_an_ok_experiment_that_now_fails_is_a_regression(runs: dict[str, Path], dlbs: Any,
                                                         tmp_path: Path) -> None:
    failing = tmp_path / "failing"
    result = dummy_run(failing, *SWEEP, "-P", "dummy.sleep=0.02", "-E",
                       '{"condition": {"exp.model": "vgg16"}, '
                       '"parameters": {"dummy.fail": "exit"}}')
    assert result.returncode == 1 and "1 failure, 1 ok" in result.stderr, result.stderr
    compared = dlbs("compare", str(runs["base"]), str(failing), "--by", "exp.model")
    assert compared.returncode == 1
    assert "now fails" in compared.stdout.lower()


def test_bad_input_exits_2(tmp_path: Path, dlbs: Any) -> None:
    for arguments, message in (
        (["compare", str(tmp_path / "nothing"), str(tmp_path)], "no such log"),
        (["compare", str(tmp_path), str(tmp_path), "--threshold", "x"], "is not a percentage"),
    ):
        result = dlbs(*arguments)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("dlbs: error: ") and message in result.stderr
        assert "Traceback" not in result.stderr
