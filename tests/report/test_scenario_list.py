"""The scenario list exists once on each side of the dlbs/backend boundary, and they agree.

dlbs declares the scenarios in configs/02-evaluation.yaml (`exp.scenario`'s choices); the
backends, which import only the standard library, keep their own copy in
python/benchmark_common/options.py. Reports name no scenario list: a latency report shows
every scenario but `benchmark` and `accuracy` (issue 22, Deliver 2).
"""

from __future__ import annotations

import re
import sys

from dlbs.config.loader import load_spec
from dlbs.plan.builder import condition_holds
from dlbs.report.kinds import report_kind
from tests.report.conftest import REPO

if str(REPO / "python") not in sys.path:   # the backends' shared package, in-process
    sys.path.insert(0, str(REPO / "python"))

SCENARIO = "exp.scenario"


def declared() -> list[str]:
    choices = load_spec(None).params[SCENARIO].choices
    assert choices, "exp.scenario declares its choices"
    return [str(choice) for choice in choices]


def test_the_backends_copy_is_the_configs_list() -> None:
    from benchmark_common import options

    assert list(options.SCENARIOS) == declared()
    assert list(options.PERFORMANCE_SCENARIOS) == [
        name for name in declared() if name not in ("benchmark", "accuracy")]


def test_each_evaluation_report_shows_its_scenarios() -> None:
    from benchmark_common import options

    latency, accuracy = report_kind("latency"), report_kind("accuracy")
    for name in declared():
        assert latency.shows(name) == (name in options.PERFORMANCE_SCENARIOS), name
        assert accuracy.shows(name) == (name == "accuracy"), name
    assert report_kind("regular").shows("server") and not report_kind("regular").picks_scenarios


def test_every_rule_on_the_scenario_names_declared_scenarios() -> None:
    # A rule that tests exp.scenario matches some scenario, and a scenario it names by name
    # (server|max_qps) is one of the choices: renaming one cannot leave a rule behind.
    choices = declared()
    tested = [extension for extension in load_spec(None).extensions
              if SCENARIO in extension.condition]
    assert tested
    for extension in tested:
        test = extension.condition[SCENARIO]
        assert any(condition_holds(test, name) for name in choices), extension.source
        if isinstance(test, str) and re.fullmatch(r"[a-z_]+(\|[a-z_]+)*", test):
            assert set(test.split("|")) <= set(choices), extension.source
