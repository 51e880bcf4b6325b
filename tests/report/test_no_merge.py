"""No report cell ever combines different experiments (issue 11, item 1)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlbs.config.loader import load_spec
from dlbs.errors import ResultsError
from dlbs.plan.builder import plan
from dlbs.report import Options, build_report, render
from dlbs.report.identity import experiment_identity, identity_items, key_rules
from dlbs.report.select import Filter
from tests.report.conftest import REPO, record, records
from tests.results.helpers_results import experiment, write_log

EXAMPLES = sorted((REPO / "examples").glob("*.yaml")) + [REPO / "examples" / "dlbs_style.json"]


@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda path: path.name)
def test_identity_keys_are_what_the_planner_hashes(spec: Path) -> None:
    # The report's rule for identity parameters reproduces every example's exp.id.
    rules = key_rules()
    for item in plan(load_spec(spec)):
        identity = {k: v for k, v in identity_items(item, rules).items() if k != "exp.id"}
        digest = hashlib.sha256(orjson.dumps(identity, option=orjson.OPT_SORT_KEYS))
        assert digest.hexdigest()[:12] == item["exp.id"], item["exp.log_file"]


def two_frameworks() -> list[dict[str, Any]]:
    """The issue's case: one model, batch and GPU count; PyTorch at 100 ms, MXNet at 50 ms."""
    pytorch = experiment("resnet50", 1, 32, 100.0, exp_id="aaa")
    mxnet = experiment("resnet50", 1, 32, 50.0, exp_id="bbb")
    mxnet["exp.framework"] = "mxnet"
    return [pytorch, mxnet]


def test_two_frameworks_are_two_rows() -> None:
    report = build_report(records(*two_frameworks()), "regular")
    assert report.row_keys[:2] == ["exp.model", "exp.framework"]
    assert [(r["framework"], r["time_ms"], r["runs"]) for r in report.records()] == [
        ("mxnet", 50.0, 1), ("pytorch", 100.0, 1)]
    text = render(report, "text")
    assert "75" not in text and "n=2" not in text


def test_two_frameworks_from_logs_on_the_command_line(tmp_path: Path, dlbs: Any) -> None:
    for item in two_frameworks():
        write_log(tmp_path / f"{item['exp.framework']}.log", item)
    result = dlbs("report", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("model"))
    assert header.split()[:2] == ["model", "framework"]
    rows = [line.split() for line in lines if line.startswith("resnet50")]
    # (Issue 23: text rounds to significant digits; this was 50.00 and 100.00.)
    assert [(row[1], row[-2]) for row in rows] == [("mxnet", "50"), ("pytorch", "100")]
    assert "75" not in result.stdout


def test_a_users_own_axis_is_a_row_key() -> None:
    # `trial` is declared nowhere in configs/: a user's parameter, hence part of the id.
    items = [experiment("resnet50", 1, 32, 100.0 + i, exp_id=f"t{i}", trial=i) for i in (1, 2)]
    items += [experiment("resnet50", 1, 32, 90.0, exp_id="c1", trial=1,
                         **{"pytorch.extra_args": ["--channels_last", "true"]})]
    report = build_report(records(*items), "regular")
    assert "trial" in report.row_keys and "pytorch.extra_args" in report.row_keys
    rows = {(r["trial"], str(r["pytorch.extra_args"])): r["time_ms"] for r in report.records()}
    assert rows == {(1, "None"): 101.0, (2, "None"): 102.0,
                    (1, "['--channels_last', 'true']"): 90.0}
    text = render(report, "text")
    assert '["--channels_last","true"]' in text     # a list shows as JSON


def test_derived_parameters_do_not_add_columns() -> None:
    # effective batch and a framework's argument list follow from the GPUs and the batch.
    items = []
    for gpus in (1, 2, 4):
        item = experiment("resnet50", gpus, 64, 100.0 + gpus)
        item["pytorch.args"] = ["--batch_size 64", f"--num_gpus {gpus}"]
        item["exp.gpus"] = ",".join(str(g) for g in range(gpus))
        items.append(item)
    report = build_report(records(*items), "weak")
    assert report.row_keys == ["exp.model", "exp.replica_batch"]
    regular = build_report(records(*items), "regular")
    assert regular.row_keys == ["exp.model", "exp.num_gpus", "exp.replica_batch",
                                "exp.effective_batch"]


def test_by_refuses_to_hide_a_varying_parameter() -> None:
    items = records(experiment("resnet50", 1, 32, 100.0, exp_id="a", trial=1),
                    experiment("resnet50", 1, 32, 120.0, exp_id="b", trial=2))
    with pytest.raises(ResultsError, match=r"rows keyed by exp.model would combine different "
                                           r"experiments: trial \(2 values\) also vary"):
        build_report(items, Options(by=["exp.model"]))
    report = build_report(items, Options(by=["model", "trial"]))
    assert report.row_keys == ["exp.model", "trial"] and len(report.records()) == 2


def test_filters_select_experiments() -> None:
    items = records(
        experiment("resnet50", 1, 32, 100.0, exp_id="a", trial=1),
        experiment("resnet50", 1, 32, 120.0, exp_id="b", trial=2),
        experiment("vgg16", 1, 32, 300.0, exp_id="c", trial=1),
    )

    def times(*filters: str) -> list[float]:
        options = Options(filters=[Filter.parse(text) for text in filters])
        return sorted(r["time_ms"] for r in build_report(items, options).records())

    assert times("trial=1") == [100.0, 300.0]
    assert times("exp.model=res*") == [100.0, 120.0]
    assert times("model=res*", "trial=2") == [120.0]
    assert times("model=vgg16", "model=resnet50") == [100.0, 120.0, 300.0]   # same key: either
    with pytest.raises(ResultsError, match="no experiment has a key 'nonsense'"):
        times("nonsense=1")
    with pytest.raises(ResultsError, match="is not KEY=PATTERN"):
        Filter.parse("trial")


def test_columns_with_or_without_results_prefix() -> None:
    items = records(experiment("resnet50", 1, 32, 100.0, **{
        "results.time_data": [90.0, 100.0, 110.0]}))
    for names in (["time_median", "results.time_p99"], ["results.time_median", "time_p99"]):
        [row] = build_report(items, Options(columns=names)).records()
        assert (row["time_median"], row["time_p99"]) == (100.0, 109.8)
    with pytest.raises(ResultsError, match="--columns time_nonsense: no experiment has "
                                           "results.time_nonsense"):
        build_report(items, Options(columns=["time_nonsense"]))
    with pytest.raises(ResultsError, match="only weak and strong reports"):
        build_report(items, Options(columns=["speedup"]))


def test_pivot_gives_the_free_table() -> None:
    items = records(*[experiment(model, 1, batch, time, exp_id=f"{model}{batch}")
                      for model, batch, time in (("resnet50", 32, 100.0), ("resnet50", 64, 160.0),
                                                 ("vgg16", 32, 200.0))])
    report = build_report(items, Options(kind="pivot", rows=["exp.model"],
                                         cols="exp.replica_batch", value="results.throughput"))
    text = render(report, "text")
    assert text.startswith("Pivot table: throughput (inst/s) by replica batch\n")
    table = text.split("throughput (inst/s), by replica batch\n", 1)[1].splitlines()
    assert table[0].split() == ["model", "32", "64"]
    assert table[2].split() == ["resnet50", "320", "400"]   # issue 23: was 320.00, 400.00
    assert table[3].split() == ["vgg16", "160", "-"]
    with pytest.raises(ResultsError, match="needs --rows KEY, --cols KEY and --value"):
        build_report(items, Options(kind="pivot", rows=["exp.model"]))


def test_one_experiment_on_two_gpu_models_is_two_rows() -> None:
    item = experiment("resnet50", 1, 32, 100.0, exp_id="same")
    faster = dict(item, **{"results.time": 60.0})
    items = [record(item, 1.0, environment={"gpu_model": "NVIDIA H100 80GB HBM3"}),
             record(faster, 2.0, environment={"gpu_model": "NVIDIA H200"})]
    report = build_report(items, "regular")
    assert "env.device_model" in report.row_keys
    assert [(r["device_model"], r["time_ms"]) for r in report.records()] == [
        ("NVIDIA H100 80GB HBM3", 100.0), ("NVIDIA H200", 60.0)]
    one_gpu = build_report(items, Options(filters=[Filter.parse("env.gpu_model=*H200")]))
    assert [r["time_ms"] for r in one_gpu.records()] == [60.0]


# Property: whatever parameters vary, every cell holds exactly one experiment.
_VALUES = st.sampled_from([1, 2, "a", "b", True, None, [1], [2]])


@given(st.lists(st.fixed_dictionaries({
    "model": st.sampled_from(["resnet50", "vgg16"]),
    "batch": st.sampled_from([16, 32]),
    "gpus": st.sampled_from([1, 2]),
    "extra": st.dictionaries(st.sampled_from(["axis_a", "axis_b", "pytorch.extra_args",
                                              "exp.dtype"]), _VALUES, max_size=3),
    "id": st.integers(0, 6),
    "device": st.sampled_from([None, "H100", "H200"]),
}), min_size=1, max_size=25), st.sampled_from(["regular", "weak", "strong"]))
def test_no_cell_ever_holds_two_experiments(items: list[dict[str, Any]], kind: str) -> None:
    made = []
    for index, item in enumerate(items):
        values = experiment(item["model"], item["gpus"], item["batch"], 10.0 + index,
                            exp_id=f"id{item['id']}", **item["extra"])
        environment = {"gpu_model": item["device"]} if item["device"] else {}
        made.append(record(values, float(index), environment=environment))
    report = build_report(made, kind)
    rules = key_rules()
    seen = set()
    for cell in report.cells:
        identities = {experiment_identity(attempt, rules) for attempt in cell.attempts}
        assert len(identities) == 1, cell
        assert not identities & seen
        seen |= identities
    # Every experiment is in the tables (they are all ok and complete).
    assert seen == {experiment_identity(r, rules) for r in made}
    places = [(cell.row, cell.column) for cell in report.cells]
    assert len(places) == len(set(places))
