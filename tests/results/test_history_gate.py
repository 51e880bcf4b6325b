"""`dlbs history` never mixes experiments, never passes what it could not judge.

Issue 33, item 2: `--by exp.model` joined batch 4 and batch 16 into one series, which
`--check` could call a regression; it is refused as `dlbs report --by` refuses it, naming the
keys to add. Issue 34, item 5: an attempt dated in the future (a host with a wrong clock,
joined by `results copy`) stayed "the newest" and masked every later regression; it is left
out and named, and the table names the run it judged. Item 6: a gate that judged nothing (a
misspelt metric, a filter matching nothing, nan thresholds) or whose newest run failed or
has negative times passed; it fails.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers_results import nightly_attempt

from dlbs.cli.main import main
from dlbs.errors import ResultsError
from dlbs.history import build_history, check
from dlbs.history.check import FAILED, REGRESSION, STEADY
from dlbs.report.select import Filter
from dlbs.results.sources import load_attempts
from dlbs.results.store import Attempt, open_store
from tests.cli.test_plan_cli import assert_one_error_line

STEADY_RUNS = [10.0, 10.2, 9.9, 10.1, 10.0, 9.8, 10.1, 10.0, 10.2, 9.9]


def _write(location: str | Path, attempts: list[Attempt]) -> str:
    with open_store(location) as store:
        store.record_attempts(attempts)
    return str(location)


def _steady(model: str = "resnet18", batch: int = 4, days: int = 10, **extra) -> list[Attempt]:
    return [nightly_attempt(model, day, value, batch=batch, **extra)
            for day, value in zip(range(1, days + 1), STEADY_RUNS)]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- 33.2: --by never joins different experiments --------------------------------------------

@pytest.fixture
def two_batches(tmp_path: Path) -> str:
    """resnet18 at batch 4 (~2.3 s) and batch 16 (~6.2 s), nightly, the same days."""
    attempts = [nightly_attempt("resnet18", day, 2294.0 + day, batch=4) for day in range(1, 8)]
    attempts += [nightly_attempt("resnet18", day, 6211.0 + day, batch=16) for day in range(1, 8)]
    return _write(tmp_path / "results.db", attempts)


def test_by_a_key_that_joins_two_batches_is_refused(two_batches: str) -> None:
    attempts = load_attempts([two_batches])
    with pytest.raises(ResultsError) as raised:
        build_history(attempts, by=["exp.model"])
    assert "exp.replica_batch (2 values)" in raised.value.message
    assert "--by exp.model,exp.replica_batch" in raised.value.hint
    split = build_history(attempts, by=["exp.model", "exp.replica_batch"])
    assert [series.shown for series in split.series] == [("resnet18", 4), ("resnet18", 16)]
    kept = build_history(attempts, by=["model"], filters=[Filter.parse("exp.replica_batch=4")])
    assert [series.values.max() for series in kept.series] == [2301.0]


def test_the_cli_refuses_it_in_one_line_as_report_does(two_batches: str, dlbs_cli) -> None:
    for command in (("history", "--check"), ("history",), ("report",)):
        result = dlbs_cli(command[0], two_batches, *command[1:], "--by", "exp.model")
        assert_one_error_line(result, "exp.replica_batch")


@pytest.mark.parametrize("by, varies", [
    ("env.host", "exp.model"),                 # a host's every model in one series
    ("exp.model,exp.replica_batch", "exp.dtype"),
    ("exp.model,exp.replica_batch", "env.device_model"),   # an H100 and an A100 run
])
def test_other_mixes_are_refused(tmp_path: Path, by: str, varies: str) -> None:
    attempts = _steady("resnet18") + _steady("vgg16")
    if varies == "exp.dtype":
        attempts = _steady("resnet18")
        half = [nightly_attempt("resnet18", day, 5.0, batch=4, exp_id="half")
                for day in range(11, 14)]
        attempts += [Attempt(**{**a.__dict__, "params": {**a.params, "exp.dtype": "float16"}})
                     for a in half]
    if varies == "env.device_model":
        attempts = _steady("resnet18") + [nightly_attempt("resnet18", 11, 5.0, batch=4, gpu="A100",
                                                           host="ws2")]
    database = _write(tmp_path / "results.db", attempts)
    with pytest.raises(ResultsError, match=varies.replace(".", r"\.")):
        build_history(load_attempts([database]), by=by.split(","))


# -- 34.5: a future-dated attempt never masks a regression -----------------------------------

def _future(day: int, value: float, when: datetime, host: str = "wrongclock") -> Attempt:
    item = nightly_attempt("resnet18", day, value, batch=4, host=host)
    return Attempt(**{**item.__dict__, "started_at": (when - timedelta(minutes=10)).isoformat(),
                      "ended_at": when.isoformat()})


@pytest.mark.parametrize("when", [datetime(2099, 1, 1, tzinfo=UTC),
                                  datetime.now(UTC) + timedelta(days=2)])
def test_a_future_point_is_left_out_and_the_slow_run_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], when: datetime,
        store_location: str) -> None:
    # The wrong clock's run is joined by `results copy`, then a run 30x slower arrives.
    laptop = _write(tmp_path / "laptop.db", [_future(11, 10.0, when)])
    store = _write(store_location, _steady(batch=4) + [
        nightly_attempt("resnet18", 12, 300.0, batch=4)])
    assert _run(capsys, "results", "copy", laptop, store)[0] == 0
    code, out, err = _run(capsys, "history", store, "--check")
    assert code == 1, err
    assert "1 regression(s)" in err
    assert "1 attempt(s) dated in the future were left out" in err
    assert "tag nightly-11, host wrongclock" in err
    [row] = [line for line in out.splitlines() if "regression" in line]
    assert "nightly-12" in row and "2026-02-12 01:10" in row and "300" in row
    code, out, _ = _run(capsys, "history", store, "--check", "--format", "json")
    document = json.loads(out)
    [configuration] = document["configurations"]
    assert configuration["check"]["judged"]["runtime.run_tag"] == "nightly-12"
    assert [item["runtime.run_tag"] for item in document["future"]] == ["nightly-11"]


def test_a_clock_a_little_ahead_is_no_future(tmp_path: Path) -> None:
    ahead = datetime.now(UTC) + timedelta(minutes=10)
    store = _write(tmp_path / "results.db", _steady(batch=4) + [_future(11, 10.0, ahead)])
    history = build_history(load_attempts([store]))
    assert not history.future and len(history.series[0].values) == 11
    # Read a day later, the same point is in the past; read from before it, in the future.
    later = build_history(load_attempts([store]), now=time.time() - 86400)
    assert len(later.future) == 1 and len(later.series[0].values) == 10


# -- 34.6: a gate that judged nothing, or whose newest run failed, is not a pass -------------

@pytest.fixture
def regressed(tmp_path: Path) -> str:
    """A steady configuration whose newest run (nightly-11) is 20% slower: exit 1."""
    return _write(tmp_path / "results.db", _steady(batch=4) + [
        nightly_attempt("resnet18", 11, 12.0, batch=4)])


@pytest.mark.parametrize("argv, message", [
    (["--metric", "time_mediam"], "--metric time_mediam: no attempt has a value"),
    (["--metric", "results.bogus"], "--metric results.bogus: no attempt has a value"),
    (["--filter", "exp.model=resnet50"], "nothing to judge: the filters match no ended"),
    (["--filter", "runtime.run_tag=nightly-99"], "nothing to judge: the filters match no"),
    (["--z", "nan"], "--z nan"),
    (["--z", "inf"], "--z inf"),
    (["--z", "-1"], "--z -1"),
    (["--min-change", "nan%"], "--min-change nan%"),
    (["--min-change", "nan"], "--min-change nan%"),
    (["--min-change=-5%"], "--min-change -5%"),
    (["--min-change", "inf"], "--min-change inf%"),
    (["--window", "0"], "--window 0"),
])
def test_nothing_judged_is_an_error(regressed: str, dlbs_cli, argv: list[str],
                                    message: str) -> None:
    result = dlbs_cli("history", regressed, "--check", *argv)
    assert_one_error_line(result, message)


def test_the_misspelt_metric_names_the_right_one(regressed: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "history", regressed, "--metric", "time_mediam")
    assert code == 2 and "hint: values: time_median" in err


def test_a_store_with_no_value_of_the_metric_judges_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _write(tmp_path / "results.db",
                   [nightly_attempt("resnet18", day, 1.0, status="failure") for day in (1, 2)]
                   + [nightly_attempt("vgg16", 3, 1.0)])
    code, _, err = _run(capsys, "history", store, "--check", "--filter", "exp.model=resnet18")
    assert code == 2 and "nothing to judge: no ok attempt of the 2 matched has a value" in err


@pytest.mark.parametrize("status", ["failure", "timeout", "cancelled", "interrupted"])
def test_a_newest_run_that_failed_fails_the_gate(tmp_path: Path, status: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    store = _write(tmp_path / "results.db", _steady(batch=4) + [
        nightly_attempt("resnet18", 11, 0.0, batch=4, status=status)])
    code, out, err = _run(capsys, "history", store, "--check")
    assert code == 1, err
    assert "0 regression(s), 1 failed" in err
    [row] = [line for line in out.splitlines() if line.rstrip().endswith(FAILED)]
    assert "nightly-11" in row
    assert f"its newest run nightly-11 (exp.id id-resnet18-4, host ci, ended " \
           f"2026-02-11T01:10:00+00:00): it ended {status} (it {status})" in out
    [verdict] = check(build_history(load_attempts([store])))
    assert verdict.status == FAILED and verdict.series.problem.status == status


def test_negative_times_are_no_value_and_fail_the_gate(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    store = _write(tmp_path / "results.db", _steady(batch=4) + [
        nightly_attempt("resnet18", 11, -3.5, batch=4)])
    code, out, err = _run(capsys, "history", store, "--check")
    assert code == 1, err
    assert "its newest run nightly-11" in out and "it has no value of results.time_median" in out
    # A backend's own mean below zero, followed with --metric time.
    item = nightly_attempt("resnet18", 12, 1.0, batch=4)
    _write(store, [Attempt(**{**item.__dict__, "results": {"results.time": -3.5}})])
    code, out, err = _run(capsys, "history", store, "--check", "--metric", "time")
    assert code == 1, err
    assert "its newest run nightly-12" in out and "results.time is -3.5" in out
    assert "1 ok attempt(s) with a results.time below zero were left out" in err


def test_a_failure_before_an_ok_rerun_of_the_same_run_passes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failed = nightly_attempt("resnet18", 11, 0.0, batch=4, status="timeout", attempt=11)
    rerun = nightly_attempt("resnet18", 11, 10.05, batch=4, attempt=12)
    rerun = Attempt(**{**rerun.__dict__, "ended_at": "2026-02-11T03:00:00.000+00:00"})
    store = _write(tmp_path / "results.db", _steady(batch=4) + [failed, rerun])
    code, _, err = _run(capsys, "history", store, "--check")
    assert code == 0 and "1 steady" in err
    # The other way round, the run's ok point still stands: the run has a value.
    late_failure = Attempt(**{**failed.__dict__, "attempt": 13,
                              "ended_at": "2026-02-11T05:00:00.000+00:00"})
    _write(store, [late_failure])
    assert [v.status for v in check(build_history(load_attempts([store])))] == [STEADY]


def test_the_gate_still_fails_on_the_regression(regressed: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "history", regressed, "--check")
    assert code == 1 and "1 regression(s), 0 failed" in err
    [verdict] = check(build_history(load_attempts([regressed])))
    assert verdict.status == REGRESSION
