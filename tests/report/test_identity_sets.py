"""The planner stores which parameters identify an experiment; reports read it (issue 22).

Reports no longer reload today's default configs to guess the identity parameters of
results that carry the planner's answer (`exp.id_params`); results without one (an earlier
dlbs, DLBS's logs) are still read with the default configs' rules.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from dlbs.config.loader import load_spec
from dlbs.plan.builder import plan
from dlbs.plan.identity import COMPUTED, DEFAULT, ID_PARAMS, SET
from dlbs.report import Options, build_report, render
from dlbs.report import identity as identity_module
from dlbs.report.identity import is_identity_key, key_rules, stored_rules
from dlbs.report.inputs import load_inputs
from tests.report.conftest import REPO, dummy_run, records

EXAMPLES = sorted((REPO / "examples").glob("*.yaml")) + [REPO / "examples" / "dlbs_style.json"]


@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda path: path.name)
def test_the_stored_set_is_what_the_planner_hashes(spec: Path) -> None:
    for item in plan(load_spec(spec)):
        stored = item[ID_PARAMS]
        names = [*stored[SET], *stored[DEFAULT], *stored[COMPUTED]]
        assert len(names) == len(set(names)) and ID_PARAMS not in names
        identity = {name: item[name] for name in names}
        digest = hashlib.sha256(orjson.dumps(identity, option=orjson.OPT_SORT_KEYS))
        assert digest.hexdigest()[:12] == item["exp.id"], item["exp.log_file"]


def test_the_groups_say_what_the_spec_set_and_what_is_computed(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("parameters: {exp.num_batches: 5, trial: 1}\n"
                    "variables: {exp.model: [resnet18, alexnet_owt]}\n")
    stored = plan(load_spec(spec, params=["exp.dtype=float16"]))[0][ID_PARAMS]
    assert stored[SET] == ["exp.model", "exp.dtype", "exp.num_batches", "trial"]
    assert "exp.num_nodes" in stored[DEFAULT] and "exp.log_dir" not in stored[DEFAULT]
    computed = stored[COMPUTED]
    # The replica batch's default follows the model (a transformer's is smaller).
    assert computed.index("exp.replica_batch") < computed.index("exp.effective_batch")
    assert computed.index("exp.num_replicas") < computed.index("exp.effective_batch")
    assert computed[-1] == "pytorch.args"     # renders nearly everything: computed last


def fake_sweep(gpus: int, **more: Any) -> dict[str, Any]:
    """A planned experiment's keys as a log gives them, its identity set included."""
    item = {"exp.model": "resnet50", "exp.framework": "pytorch", "exp.num_gpus": gpus,
            "exp.replica_batch": 32, "exp.effective_batch": 32 * gpus,
            "exp.log_dir": f"logs/{gpus}", "trial": 1, "results.status": "ok",
            "results.time": 100.0 / gpus, **more}
    item["exp.id"] = f"id{gpus}{sorted(more.items())}"
    item[ID_PARAMS] = {SET: ["exp.model", "trial", *more], DEFAULT: [
        "exp.framework", "exp.replica_batch"], COMPUTED: ["exp.num_gpus", "exp.effective_batch"]}
    return item


def test_reports_read_the_stored_sets_not_the_configs(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> None:
        raise AssertionError("the default configs were read")

    monkeypatch.setattr(identity_module, "default_rules", refuse)
    items = records(fake_sweep(1), fake_sweep(2), fake_sweep(4))
    report = build_report(items, "weak")
    # exp.log_dir varies but is no identity parameter: never a row key, nor shown.
    assert report.row_keys == ["exp.model", "exp.replica_batch"]
    assert dict(report.constants)["trial"] == 1           # the spec set it: shown
    assert "exp.framework" in dict(report.constants)      # a usual key: shown
    text = render(report, "text")
    assert "exp.log_dir" not in text and "All rows: framework pytorch" in text


def test_a_parameter_outside_the_stored_set_is_no_row_key() -> None:
    # The configs would call `note` (undeclared) an identity parameter; the planner did not.
    items = records(fake_sweep(1, note="a"), fake_sweep(1, note="b"))
    for item in items:
        item.experiment[ID_PARAMS][SET].remove("note")
        item.experiment["exp.id"] = "same"
    rules = key_rules(build_report(items, "regular").selection.attempts)
    assert rules.identity is not None and not is_identity_key("note", rules)
    assert len(build_report(items, "regular").records()) == 1


def test_results_without_a_stored_set_use_the_default_configs() -> None:
    items = records(fake_sweep(1), {**fake_sweep(2), ID_PARAMS: None})
    from dlbs.results.columns import Attempts

    assert stored_rules(Attempts.of_records(items)) is None
    assert key_rules(Attempts.of_records(items)) is identity_module.default_rules()


@pytest.mark.slow
def test_a_real_sweep_is_reported_from_its_stored_sets(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    result = dummy_run(tmp_path, "-V", 'exp.model=["resnet50", "vgg16"]',
                       "-P", "exp.num_batches=2", "-P", "dummy.sleep=0.001")
    assert result.returncode == 0, result.stderr
    expected = build_report(load_inputs([tmp_path]), Options()).records()
    monkeypatch.setattr(identity_module, "default_rules", lambda: pytest.fail("configs read"))
    for source in ([tmp_path], [tmp_path / "results.db"], sorted(tmp_path.glob("*.log"))):
        report = build_report(load_inputs(source), Options())
        assert report.row_keys == ["exp.model", "exp.replica_batch", "exp.effective_batch"]
        # (Logs carry no environment: the device model is known from the database only.)
        assert [{key: value for key, value in row.items() if key != "device_model"}
                for row in report.records()] == [
            {key: value for key, value in row.items() if key != "device_model"}
            for row in expected]
