"""Issue 33, item 4 (command line): `dlbs compare` of two run tags of one store.

`--filter` applies to both sides; `--tags BASE_TAG NEW_TAG` (or `--base-filter` and
`--new-filter`) picks each side's attempts, so one shared store compares last night with
tonight. A tag the store lacks is refused with the tags it has; sides with nothing in common
get the `--by` that would match them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlbs.results.store import Attempt, open_store
from tests.cli.test_plan_cli import assert_one_error_line
from tests.results.helpers_results import nightly_attempt


def _side(tag: str, day: int, slow: float = 1.0, **params: object) -> list[Attempt]:
    found = []
    for model, batch in (("resnet18", 4), ("resnet18", 16), ("vgg16", 4)):
        item = nightly_attempt(model, day, 10.0 * batch * (slow if model == "vgg16" else 1.0),
                               batch=batch, tag=tag, samples=20)
        found.append(Attempt(**{**item.__dict__, "params": {**item.params, **params}}))
    return found


@pytest.fixture
def tagged(tmp_path: Path) -> str:
    database = tmp_path / "results.db"
    with open_store(database) as store:
        store.record_attempts(_side("v1", 1) + _side("v2", 2, slow=1.3))
    return str(database)


def test_two_tags_of_one_store(tagged: str, dlbs_cli) -> None:
    result = dlbs_cli("compare", tagged, "--tags", "v1", "v2")
    assert result.returncode == 1, result.stderr
    assert "3 matched: 1 slower, 2 same." in result.stdout
    [row] = [line for line in result.stdout.splitlines() if "SLOWER" in line]
    assert "vgg16" in row and "+30.0%" in row
    same = dlbs_cli("compare", tagged, "--base-filter", "runtime.run_tag=v1",
                    "--new-filter", "runtime.run_tag=v2")
    assert same.returncode == 1 and same.stdout == result.stdout
    # --filter still keeps experiments on both sides.
    kept = dlbs_cli("compare", tagged, "--tags", "v1", "v2", "--filter", "exp.model=resnet*")
    assert kept.returncode == 0 and "2 matched: 2 same." in kept.stdout
    # The other way round, vgg16 got faster.
    back = dlbs_cli("compare", tagged, tagged, "--tags", "v2", "v1")
    assert back.returncode == 0 and "1 faster" in back.stdout


def test_a_tag_the_store_lacks_is_named_with_the_tags_it_has(tagged: str, dlbs_cli) -> None:
    result = dlbs_cli("compare", tagged, "--tags", "v1", "v3")
    assert_one_error_line(result, "NEW: no attempt has the run tag 'v3'",
                          "its run tags, newest first: v2, v1")


def test_new_is_needed_without_tags(tagged: str, dlbs_cli) -> None:
    assert_one_error_line(dlbs_cli("compare", tagged), "NEW is missing", "--tags")


def test_sides_with_nothing_in_common_get_a_by_that_matches_them(tmp_path: Path,
                                                                 dlbs_cli) -> None:
    database = tmp_path / "results.db"
    with open_store(database) as store:
        store.record_attempts(_side("v1", 1, **{"dummy.sleep": 0.02}) +
                              _side("v2", 2, **{"dummy.sleep": 0.022}))
    result = dlbs_cli("compare", str(database), "--tags", "v1", "v2")
    assert_one_error_line(result, "no experiment in common (dummy.sleep: '0.02' vs '0.022')",
                          "hint: match on fewer parameters: --by exp.model,exp.replica_batch")
    fixed = dlbs_cli("compare", str(database), "--tags", "v1", "v2",
                     "--by", "exp.model,exp.replica_batch")
    assert fixed.returncode == 0, fixed.stderr
    assert "Not matched on dummy.sleep: BASE has 0.02, NEW has 0.022." in fixed.stdout
