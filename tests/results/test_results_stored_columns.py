"""A results database read as columns gives what its attempts read one by one give."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_results import dlbs_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlbs.results.columns import Attempts
from dlbs.results.sources import load_attempts
from dlbs.results.store import open_store
from dlbs.results.stored_columns import StorePart
from dlbs.util import exact_json

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(
    [1.0, 2.5, -0.0, 10**20, "a", "b", "", "1"]))
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=2),
                    st.dictionaries(st.sampled_from(["x", "y"]), _SCALARS, max_size=2))
_RESULTS = st.one_of(st.floats(0.5, 500.0), st.integers(1, 9), st.sampled_from(
    ["n/a", True, None, [1.0, 2.0]]))

ATTEMPT = st.fixed_dictionaries({
    "exp_id": st.sampled_from(["e1", "e2", "e3", "e4"]),
    "status": st.sampled_from(["ok", "ok", "failure", None]),
    "params": st.dictionaries(st.sampled_from(["exp.model", "exp.num_gpus", "trial", "axis",
                                               "env.host"]), _VALUES, max_size=4),
    "results": st.dictionaries(st.sampled_from(
        ["results.time", "results.throughput", "results.mem_peak", "results.qps",
         "exp.model_title", "exp.model"]), _RESULTS, max_size=3),
    "samples": st.one_of(st.none(), st.lists(st.floats(1.0, 100.0), min_size=1, max_size=6)),
    "environment": st.one_of(st.just({}), st.fixed_dictionaries(
        {"gpu_model": st.sampled_from(["H100", "H200"]), "host": st.sampled_from(["a", "b"])})),
    "minute": st.integers(0, 5),
})


def _store(path: Path, attempts: list[dict[str, Any]]) -> None:
    numbers: dict[str, int] = {}
    with open_store(path) as store:
        for item in attempts:
            exp_id = item["exp_id"]
            numbers[exp_id] = numbers.get(exp_id, 0) + 1
            started = f"2026-01-01T10:{item['minute']:02d}:00+00:00"
            store.record_start(exp_id, numbers[exp_id], item["params"],
                               environment=item["environment"], started_at=started)
            if item["status"] is None:
                continue   # still running
            results = dict(item["results"])
            if item["samples"] is not None:
                results["results.time_data"] = item["samples"]
            store.record_end(exp_id, numbers[exp_id], item["status"], results=results,
                             ended_at=f"2026-01-01T11:{item['minute']:02d}:00+00:00")


def _text(value: Any) -> str:
    return exact_json.dumps(value, sort_keys=True)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(ATTEMPT, min_size=1, max_size=8))
def test_columns_are_the_attempts_values(tmp_path_factory: pytest.TempPathFactory,
                                         attempts: list[dict[str, Any]]) -> None:
    path = tmp_path_factory.mktemp("columns") / "results.db"
    _store(path, attempts)
    with open_store(path) as store:
        stored = sorted(store.summaries(with_samples=True), key=lambda item: item.rowid)
    part = StorePart(str(path))
    columns = Attempts([part])
    keys = {key for item in stored for key in item.experiment} | {
        f"env.{name}" for item in stored for name in item.environment} | {"results.bogus"}
    for key in sorted(keys):
        uniform = part.uniform(key)
        column = columns.column(key)
        if uniform is not None:   # a shortcut: one value everywhere, known without the column
            assert (column.codes == uniform[0]).all() and (column.has() == uniform[1]).all()
        numbers = columns.numbers(key)
        has_value = columns.has_value(key)
        for row, item in enumerate(stored):
            source = item.environment if key.startswith("env.") else item.experiment
            name = key.removeprefix("env.") if key.startswith("env.") else key
            value = source.get(name)
            assert column.has()[row] == (name in source), (key, row)
            assert _text(column.values[column.codes[row]]) == _text(value), (key, row)
            assert has_value[row] == (value is not None), (key, row)
            finite = isinstance(value, int | float) and not isinstance(value, bool) and \
                math.isfinite(value)
            if finite:
                assert numbers[row] == float(value), (key, row)
            else:
                assert math.isnan(numbers[row]), (key, row)
    for row, item in enumerate(stored):
        samples = columns.samples([row])[0]
        assert (samples is None) == (item.samples is None)
        if samples is not None:
            assert samples.tolist() == item.samples.tolist()
        [record] = columns.records([row])
        assert record.experiment == item.experiment and record.environment == item.environment
    # The newest attempt of each experiment, as the database's `experiments` view says.
    with open_store(path) as store:
        latest = {(a.exp_id, a.attempt) for a in store.attempts(latest_only=True)}
    rows = part.latest_rows()
    assert {(stored[row].experiment["exp.id"], stored[row].experiment["results.attempt"])
            for row in rows.tolist()} == latest
    assert len(rows) == len(latest)


def test_a_database_and_its_records_read_alike(tmp_path: Path) -> None:
    attempts = [
        {"exp_id": "e1", "status": "ok", "params": {"exp.model": "m", "trial": [1, 2]},
         "results": {"results.time": "n/a"}, "samples": None, "environment": {}, "minute": 1},
        {"exp_id": "e1", "status": "ok", "params": {"exp.model": "m", "trial": [1, 2]},
         "results": {}, "samples": [1.0, 2.0, 4.0], "environment": {"gpu_model": "H100"},
         "minute": 2},
    ]
    _store(tmp_path / "results.db", attempts)
    [part] = load_attempts([tmp_path / "results.db"])._parts
    assert part.numbers("results.time").tolist()[1] == pytest.approx(7.0 / 3.0)
    assert math.isnan(part.numbers("results.time")[0])
    # A summary value that is not a number is read from the JSON summary.
    assert part.has_value("results.time").tolist() == [True, True]
    times = part.column("results.time")
    assert times.values[times.codes[0]] == "n/a"
    # A key no attempt changes is known without its column; one that changes is not.
    model = part.column("exp.model")
    assert part.uniform("exp.model") == (int(model.codes[0]), True)
    assert part.uniform("env.gpu_model") is None
    assert np.array_equal(part.latest_rows(), [1])


@pytest.mark.parametrize("damage, message", [
    ("UPDATE attempts SET report_row = NULL", "cannot read the report columns"),
    ("UPDATE attempts SET report_row = x'00'", "cannot read the report columns"),
    ("UPDATE attempts SET param_codes = x'0000'", "cannot read the report columns"),
    ("DELETE FROM param_bases", "cannot read the report columns"),
    ("DELETE FROM param_values", "table param_values lacks values"),
    ("UPDATE param_values SET value = 'not json'", "table param_values lacks values"),
])
def test_a_damaged_database_is_one_error(tmp_path: Path, damage: str, message: str) -> None:
    path = tmp_path / "results.db"
    _store(path, [{"exp_id": "e1", "status": "ok", "params": {"exp.model": "m"},
                   "results": {"results.time": 5.0}, "samples": None, "environment": {},
                   "minute": 1}])
    connection = sqlite3.connect(path)
    connection.execute(damage)
    connection.commit()
    connection.close()
    result = dlbs_cli("report", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"dlbs: error: results database {path}: ") and message in first, \
        result.stderr
    assert "Traceback" not in result.stderr


def test_a_reader_collected_on_another_thread_closes_its_store_quietly(tmp_path):
    """A reader's store is closed quietly by the garbage collector on any thread.

    A lazily decoding reader keeps its read-only store open until it is collected, which can
    happen on any thread (the run loop's workers, a test's threads).
    """
    import gc
    import threading
    import warnings

    from dlbs.results.store import open_store
    from dlbs.results.stored_columns import StorePart

    path = tmp_path / "results.db"
    open_store(str(path)).close()
    part = StorePart(str(path))
    holder = [part]
    del part
    errors: list[BaseException] = []

    def collect() -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                holder.clear()
                gc.collect()
        except BaseException as error:  # noqa: BLE001 - the test reports it
            errors.append(error)

    worker = threading.Thread(target=collect)
    worker.start()
    worker.join()
    assert errors == []
