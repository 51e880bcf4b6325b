"""`dlbs results copy`: between SQLite files, PostgreSQL and log folders; twice adds nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_results import postgres_store_url

from dlbs.errors import ResultsError
from dlbs.results.copying import copy_results
from dlbs.results.store import Attempt, open_store
from tests.report.conftest import dummy_run

PARAMS = {"exp.model": "resnet50", "exp.replica_batch": 32, "exp.num_gpus": 1}


def _attempt(exp_id: str, minute: int, status: str = "ok") -> Attempt:
    end = f"2026-01-01T10:{minute:02d}:30.000+00:00"
    return Attempt(exp_id, 1, status, None, dict(PARAMS, trial=minute),
                   {"results.time_data": [1.0, 2.0, float(minute)], "results.end_time": end},
                   f"logs/{exp_id}.log", {"host": "laptop"}, None,
                   f"2026-01-01T10:{minute:02d}:00.000+00:00", end,
                   run_tag="t1", run_host="laptop", run_folder="/home/me/logs")


def _contents(location: str) -> list[tuple]:
    with open_store(location) as store:
        return sorted((a.exp_id, a.status, a.results.get("results.end_time"), a.run_tag,
                       a.summary.get("results.time_median")) for a in store.attempts())


def test_copy_into_a_store_and_back_adds_nothing_twice(store_location: str,
                                                       tmp_path: Path) -> None:
    laptop = str(tmp_path / "laptop.db")
    with open_store(laptop) as store:
        store.record_attempts([_attempt("e1", 1), _attempt("e2", 2, "failure")])
        store.record_start("running", 1, PARAMS)
    with open_store(store_location) as shared:   # another host's attempt of e1 is there
        shared.record_attempts([_attempt("e1", 5)])
    done = copy_results(laptop, store_location)
    assert (done.copied, done.already_there, done.open_left) == (2, 0, 1)
    again = copy_results(laptop, store_location)
    assert (again.copied, again.already_there) == (0, 2)
    with open_store(store_location) as shared:
        assert [a.attempt for a in shared.attempts("e1")] == [1, 2]   # the next number
        copied = shared.attempts("e1")[1]
        assert (copied.run_tag, copied.run_host, copied.environment) == (
            "t1", "laptop", {"host": "laptop"})
        assert shared.latest_status("running") is None   # open attempts stay behind
    # Back to a new SQLite file, then to a folder's results.db: the same attempts.
    back = str(tmp_path / "back.db")
    assert copy_results(store_location, back).copied == 3
    assert copy_results(back, store_location).copied == 0
    assert _contents(back) == _contents(store_location)
    folder = tmp_path / "folder"
    folder.mkdir()
    assert copy_results(back, str(folder)).copied == 3
    assert _contents(str(folder / "results.db")) == _contents(back)


@pytest.mark.slow
def test_a_log_folder_joins_a_store_without_its_recorded_attempts(store_location: str,
                                                                   tmp_path: Path) -> None:
    logs = tmp_path / "run"
    result = dummy_run(logs, "-V", 'exp.model=["resnet50", "vgg16", "alexnet"]',
                       "-P", "exp.num_batches=5")
    assert result.returncode == 0, result.stderr
    local = str(logs / "results.db")
    # Two of the three attempts reached the store (as when the database went away mid-run).
    with open_store(local) as store:
        kept = [a for a in store.attempts() if a.params["exp.model"] != "alexnet"]
    with open_store(store_location) as shared:
        shared.record_attempts(kept)
    done = copy_results(str(logs), store_location)
    assert (done.copied, done.already_there) == (1, 2)
    assert copy_results(str(logs), store_location).copied == 0
    with open_store(store_location) as shared:
        models = sorted(a.params["exp.model"] for a in shared.attempts())
        assert models == ["alexnet", "resnet50", "vgg16"]
        [alexnet] = [a for a in shared.attempts() if a.params["exp.model"] == "alexnet"]
        assert alexnet.status == "ok" and alexnet.summary["results.time_count"] == 5


def test_bad_copies_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="no such results database or log folder"):
        copy_results(str(tmp_path / "missing"), str(tmp_path / "x.db"))
    path = tmp_path / "same.db"
    open_store(path).close()
    with pytest.raises(ResultsError, match="both the source and the destination"):
        copy_results(str(path), str(path))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultsError, match=r"no \*\.log files"):
        copy_results(str(tmp_path / "empty"), str(tmp_path / "x.db"))


@pytest.mark.postgres
def test_the_cli_copies_and_says_what_it_did(tmp_path: Path, dlbs_cli) -> None:
    source = tmp_path / "a.db"
    with open_store(source) as store:
        store.record_attempts([_attempt("e1", 1)])
    with postgres_store_url() as url:
        first = dlbs_cli("results", "copy", str(source), url)
        second = dlbs_cli("results", "copy", str(source), url)
    assert first.returncode == 0 and "copied 1 attempt(s)" in first.stderr
    assert second.returncode == 0 and "copied 0 attempt(s)" in second.stderr
    assert "1 already there" in second.stderr
    password = url.split(":")[2].split("@")[0]
    assert password and password not in first.stderr + first.stdout
