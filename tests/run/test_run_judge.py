"""One status rule: the run loop's verdict and every log reader judge printed values alike."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlbs.results.protocol import judge_status
from dlbs.run.judge import judge
from dlbs.run.outcome import Outcome


@pytest.mark.parametrize(("time", "status"), [
    (12.5, "ok"), (1, "ok"), (1e-9, "ok"),
    (float("inf"), "failure"), (float("-inf"), "failure"), (float("nan"), "failure"),
    (0, "failure"), (-1.0, "failure"), (True, "failure"), ("12", "failure"), (None, "failure"),
])
def test_a_log_without_a_status_is_ok_only_with_a_positive_finite_time(time, status):
    verdict = judge(Outcome("ok"), {"results.time": time}, {})
    assert verdict.status == status
    assert judge_status({"results.time": time})["results.status"] == status
    if status == "failure":
        assert verdict.message == f"the backend printed no valid results.time ({time!r})"


def test_an_infinite_time_is_not_a_result_even_from_a_process_that_exited_0():
    """Issue 22: the loop said ok for `results.time = inf`, the log readers failure."""
    verdict = judge(Outcome("ok", returncode=0), {"results.time": math.inf,
                                                  "results.throughput": 0.0}, {})
    assert verdict.status == "failure"
    assert verdict.results["results.time"] == math.inf  # what was printed is kept


def test_nothing_printed_is_a_failure_saying_so():
    assert judge(Outcome("ok"), {}, {}).message == "the backend printed no results"


printed_values = st.dictionaries(
    st.sampled_from(["results.time", "results.status", "results.status_msg",
                     "results.throughput"]),
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
              st.sampled_from(["ok", "failure", "timeout", "", "12"])),
    max_size=4)


@given(printed_values)
def test_the_loop_and_the_log_readers_agree_on_every_exit_0(printed: dict[str, Any]):
    verdict = judge(Outcome("ok", returncode=0), printed, {})
    assert verdict.status in ("ok", "failure")
    assert (verdict.status == "ok") == (judge_status(printed)["results.status"] == "ok")


@given(printed_values, st.sampled_from(["failure", "timeout", "interrupted", "cancelled"]))
def test_the_targets_word_wins_when_it_is_not_ok(printed: dict[str, Any], status: str):
    assert judge(Outcome(status, "why"), printed, {}).status == status
