"""History over run tags and `dlbs history --check` (Conbench's lookback z-score), both stores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlbs.errors import ResultsError
from dlbs.history import build_history, check
from dlbs.history.check import IMPROVEMENT, REGRESSION, STEADY, TOO_FEW
from dlbs.report.select import Filter
from dlbs.results.sources import load_attempts
from dlbs.results.store import Attempt, open_store
from tests.report.conftest import dummy_run


def _attempts(runs: dict[str, list[float]], tags: int, start_day: int = 1) -> list[Attempt]:
    """One ok attempt per configuration and tag: `runs` maps a model to its medians."""
    found = []
    for model, medians in runs.items():
        for index, median in enumerate(medians[:tags]):
            day = start_day + index
            params = {"exp.model": model, "exp.framework": "pytorch", "exp.device_type": "gpu",
                      "exp.num_gpus": 1, "exp.replica_batch": 32, "exp.effective_batch": 32,
                      "runtime.run_tag": f"nightly-{day:02d}"}
            found.append(Attempt(
                f"id-{model}", index + 1, "ok", None, params,
                {"results.time_data": [median] * 5}, None, {"gpu_model": "H100"}, None,
                f"2026-02-{day:02d}T01:00:00.000+00:00", f"2026-02-{day:02d}T01:10:00.000+00:00",
                run_tag=f"nightly-{day:02d}", run_host="ci", run_folder="/ci/logs"))
    return found


STEADY_RUNS = [10.0, 10.2, 9.9, 10.1, 10.0, 9.8, 10.1, 10.0, 10.2, 9.9]


@pytest.fixture
def history_store(store_location: str) -> str:
    runs = {"resnet50": [*STEADY_RUNS, 10.1],          # steady
            "vgg16": [*STEADY_RUNS, 12.0],             # 20% slower: a regression
            "alexnet": [*STEADY_RUNS, 8.0],            # 20% faster: an improvement
            "bert": [10.0, 10.1]}                      # two runs: too few to tell
    with open_store(store_location) as store:
        store.record_attempts([item for model, values in runs.items()
                               for item in _attempts({model: values}, len(values))])
        # A failure and a rerun under the newest tag: the newest ok attempt is the point.
        store.record_attempt("id-resnet50", 12, {"exp.model": "resnet50",
                                                 "runtime.run_tag": "nightly-11"}, "failure")
    return store_location


def test_one_point_per_tag_and_a_verdict_per_configuration(history_store: str) -> None:
    history = build_history(load_attempts([history_store]))
    assert history.keys == ["exp.model"]
    by_model = {series.shown[0]: series for series in history.series}
    assert sorted(by_model) == ["alexnet", "bert", "resnet50", "vgg16"]
    vgg = by_model["vgg16"]
    assert vgg.tags == [f"nightly-{day:02d}" for day in range(1, 12)]
    assert vgg.values.tolist() == [*STEADY_RUNS, 12.0]
    verdicts = {v.series.shown[0]: v for v in check(history)}
    assert {model: v.status for model, v in verdicts.items()} == {
        "resnet50": STEADY, "vgg16": REGRESSION, "alexnet": IMPROVEMENT, "bert": TOO_FEW}
    regression = verdicts["vgg16"]
    assert regression.window == 10 and regression.mean == pytest.approx(np.mean(STEADY_RUNS))
    assert regression.std == pytest.approx(np.std(STEADY_RUNS, ddof=1))
    assert regression.z == pytest.approx((12.0 - regression.mean) / regression.std)
    assert regression.change == pytest.approx(12.0 / regression.mean - 1)


def test_the_thresholds_and_the_window(history_store: str) -> None:
    history = build_history(load_attempts([history_store]))
    statuses = {v.series.shown[0]: v.status for v in check(history, z=100.0)}
    assert statuses["vgg16"] == STEADY            # beyond min-change, not beyond z
    statuses = {v.series.shown[0]: v.status for v in check(history, min_change=0.5)}
    assert statuses["vgg16"] == STEADY            # beyond z, not beyond min-change
    [vgg] = [v for v in check(history, window=3) if v.series.shown[0] == "vgg16"]
    assert vgg.window == 3 and vgg.mean == pytest.approx(np.mean(STEADY_RUNS[-3:]))
    throughput = build_history(load_attempts([history_store]), metric="throughput")
    statuses = {v.series.shown[0]: v.status for v in check(throughput)}
    assert statuses["vgg16"] == REGRESSION and statuses["alexnet"] == IMPROVEMENT


def test_by_and_filter(history_store: str) -> None:
    attempts = load_attempts([history_store])
    only = build_history(attempts, filters=[Filter.parse("exp.model=vgg*")])
    assert [series.shown for series in only.series] == [("id-vgg16",)]   # nothing varies
    by_gpu = build_history(attempts, by=["env.gpu_model"],
                           filters=[Filter.parse("exp.model=vgg*")])
    assert [series.shown for series in by_gpu.series] == [("H100",)]
    assert len(by_gpu.series[0].values) == 11
    # Every model in one series would join four experiments: refused (test_history_gate.py).
    with pytest.raises(ResultsError, match="exp.model"):
        build_history(attempts, by=["env.gpu_model"])


def test_the_cli_gates_on_regressions(history_store: str, dlbs_cli, tmp_path: Path) -> None:
    failing = dlbs_cli("history", history_store, "--check")
    assert failing.returncode == 1, failing.stderr
    assert "1 regression(s), 0 failed, 1 improvement(s)" in failing.stderr
    assert "regression" in failing.stdout and "+19." in failing.stdout
    passing = dlbs_cli("history", history_store, "--check", "--filter", "exp.model=resnet*")
    assert passing.returncode == 0, passing.stderr
    shown = dlbs_cli("history", history_store, "--format", "json", "--check", "-o",
                     str(tmp_path / "h.json"))
    document = json.loads((tmp_path / "h.json").read_text())
    assert shown.returncode == 1 and document["format"] == "dlbs-history"
    [vgg] = [c for c in document["configurations"] if c["keys"] == {"exp.model": "vgg16"}]
    assert vgg["points"][-1]["value"] == 12.0 and vgg["check"]["status"] == "regression"
    table = dlbs_cli("history", history_store)
    assert table.returncode == 0 and "nightly-11" in table.stdout
    bad = dlbs_cli("history", history_store, "--check", "--min-change", "lots")
    assert bad.returncode == 2 and bad.stderr.startswith("dlbs: error: --min-change")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1.0, 1000.0), min_size=3, max_size=30),
       st.floats(-0.049, 0.049))
def test_a_change_below_the_minimum_never_alerts(window: list[float], change: float) -> None:
    from dlbs.history import Settings, judge
    from dlbs.history.series import History

    values = np.array([*window, np.mean(window) * (1 + change)])
    history = History("results.time_median", [], values=values,
                      ended=np.arange(len(values), dtype=float),
                      starts=np.array([0, len(values)]))
    judgement = judge(history, Settings(window=len(window)))
    assert judgement.count(STEADY) == 1


@pytest.mark.slow
def test_runs_resume_per_tag(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    sweep = ("-V", 'exp.model=["resnet50", "vgg16"]', "-P", "exp.num_batches=3")

    def summary(*extra: str) -> str:
        result = dummy_run(logs, *sweep, *extra)
        assert result.returncode == 0, result.stderr
        return result.stderr.strip().splitlines()[-1]

    assert summary() == "dlbs: 2 ok"
    assert summary() == "dlbs: 2 unchanged"                  # no tag: resumes as ever
    assert summary("-P", "runtime.run_tag=v1") == "dlbs: 2 ok"   # a new tag measures again
    assert summary("-P", "runtime.run_tag=v1") == "dlbs: 2 unchanged"
    assert summary("-P", "runtime.run_tag=v2") == "dlbs: 2 ok"
    with open_store(logs / "results.db") as store:
        tags = [a.run_tag for a in store.attempts()]
        assert tags[2:] == ["v1", "v1", "v2", "v2"] and tags[0] == tags[1] != ""
        assert {a.params["runtime.run_tag"] for a in store.attempts()} == set(tags)
        assert {a.run_folder for a in store.attempts()} == {str(logs)}
    history = build_history(load_attempts([str(logs / "results.db")]))
    assert [len(series.values) for series in history.series] == [3, 3]
