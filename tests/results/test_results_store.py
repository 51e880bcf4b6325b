"""The results store's protocol, on both stores: attempts, statuses, jobs, runs, OOM limits.

Every test here runs on SQLite and on PostgreSQL (the `store_location` fixture: an SQLite
file, or an empty schema of the test cluster of .ci/services/postgres.sh), so that both
stores keep one set of semantics. What only one store does is in test_results_sqlite_store.py
and test_results_postgres_store.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
from helpers_results import REPO, postgres_store_url

from dlbs.errors import ResultsError
from dlbs.results.store import STARTED, Attempt, ResultsStore, open_store
from dlbs.run.oom_limits import oom_limit, oom_limits, record_oom

PARAMS = {"exp.model": "resnet50", "exp.replica_batch": 32, "exp.num_gpus": 1}


@pytest.fixture
def db(store_location: str) -> ResultsStore:
    with open_store(store_location) as store:
        yield store


def test_attempt_lifecycle(db: ResultsStore) -> None:
    assert db.latest_status("e1") is None and db.latest_attempt("e1") is None
    assert db.next_attempt("e1") == 1
    db.record_start("e1", 1, PARAMS, log_path="logs/e1.log", environment={"host": "h"},
                    started_at="2026-01-01T00:00:00.000+00:00")
    assert db.latest_status("e1") == STARTED
    assert [a.exp_id for a in db.unfinished()] == ["e1"]
    db.record_end("e1", 1, "failure", status_msg="CUDA out of memory",
                  results={"results.time": -1}, ended_at="2026-01-01T00:01:00.000+00:00")
    assert db.latest_status("e1") == "failure" and db.unfinished() == []
    assert db.next_attempt("e1") == 2
    db.record_start("e1", 2, PARAMS, log_path="logs/e1.2.log")
    db.record_end("e1", 2, "ok", results={"results.time": 12.5, "results.status": "ok"})
    latest = db.latest_attempt("e1")
    assert latest is not None and latest.attempt == 2 and latest.status == "ok"
    assert [a.attempt for a in db.attempts("e1")] == [1, 2]
    first = db.attempts("e1")[0]
    assert first.environment == {"host": "h"} and first.params == PARAMS
    assert first.status_msg == "CUDA out of memory"
    assert first.started_at == "2026-01-01T00:00:00.000+00:00"
    assert db.latest_statuses() == {"e1": "ok"}
    [experiment] = list(db.experiments())
    assert experiment["results.time"] == 12.5 and experiment["results.attempt"] == 2
    assert experiment["results.log_file"] == "logs/e1.2.log"
    assert experiment["exp.model"] == "resnet50" and experiment["exp.id"] == "e1"


def test_stored_status_wins_over_the_backend_status(db: ResultsStore) -> None:
    db.record_start("e1", 1, PARAMS)
    db.record_end("e1", 1, "timeout", status_msg="ran past exp.timeout=60",
                  results={"results.status": "ok", "results.status_msg": "x"})
    [experiment] = list(db.experiments())
    assert experiment["results.status"] == "timeout"
    assert experiment["results.status_msg"] == "ran past exp.timeout=60"


def test_skipped_attempt_in_one_write(db: ResultsStore) -> None:
    db.record_attempt("e2", 1, PARAMS, "skipped", status_msg="replica batch 64 >= OOM limit 32")
    attempt = db.latest_attempt("e2")
    assert attempt is not None and attempt.ended and attempt.status == "skipped"
    assert attempt.started_at == attempt.ended_at


@pytest.mark.parametrize("status", ["OK", "started", "", "success"])
def test_unknown_status_is_refused(db: ResultsStore, status: str) -> None:
    db.record_start("e1", 1, PARAMS)
    with pytest.raises(ResultsError, match="unknown experiment status"):
        db.record_end("e1", 1, status)
    assert db.latest_status("e1") == STARTED


def test_attempt_numbers_are_unique_and_ends_need_a_start(db: ResultsStore) -> None:
    db.record_start("e1", 1, PARAMS)
    with pytest.raises(ResultsError, match="already has attempt 1"):
        db.record_start("e1", 1, PARAMS)
    with pytest.raises(ResultsError, match="no open attempt 2"):
        db.record_end("e1", 2, "ok")
    db.record_end("e1", 1, "ok")
    with pytest.raises(ResultsError, match="no open attempt 1"):
        db.record_end("e1", 1, "failure")
    assert db.latest_status("e1") == "ok"


def test_slurm_jobs_to_reattach(db: ResultsStore) -> None:
    db.record_start("e1", 1, PARAMS)
    db.set_job_id("e1", 1, "4242")
    db.record_start("e2", 1, PARAMS, job_id="4243")
    db.record_start("e3", 1, PARAMS)
    assert sorted((a.exp_id, a.job_id) for a in db.pending_jobs()) == [
        ("e1", "4242"), ("e2", "4243")]
    assert [a.exp_id for a in db.unfinished()] == ["e3"]
    db.record_end("e1", 1, "cancelled", status_msg="slurm: CANCELLED by 0")
    assert [a.exp_id for a in db.pending_jobs()] == ["e2"]
    with pytest.raises(ResultsError, match="no open attempt"):
        db.set_job_id("e1", 1, "1")


def test_oom_limit_keeps_the_smallest_batch(db: ResultsStore) -> None:
    key = ("pytorch", "gpu", "resnet50", "float32", "training")
    assert oom_limit(db, key) is None
    record_oom(db, key, 256, exp_id="a")
    record_oom(db, key, 128, exp_id="b")
    record_oom(db, key, 512, exp_id="c")
    assert oom_limit(db, key) == 128
    assert oom_limit(db, ("pytorch", "gpu", "resnet50", "float16", "training")) is None
    assert oom_limit(db, ("pytorch", "gpu", "resnet50", "float32", "inference")) is None
    [limit] = oom_limits(db)
    assert limit["replica_batch"] == 128 and limit["exp_id"] == "b"


def test_oom_limits_survive_reopening(store_location: str) -> None:
    key = ("mxnet", "gpu", "vgg16", "float16", "training")
    with open_store(store_location) as store:
        record_oom(store, key, 64)
    with open_store(store_location, create=False) as store:
        assert oom_limit(store, key) == 64




# -- runs: tags, hosts, claims ---------------------------------------------------------------

def test_each_attempt_keeps_the_run_that_recorded_it(db: ResultsStore) -> None:
    db.record_start("e1", 1, PARAMS, run=("nightly-1", "hostA", "/runs/a"))
    db.record_attempt("e2", None, PARAMS, "skipped", run=("nightly-1", "hostA", "/runs/a"))
    db.record_start("e1", 2, PARAMS, run=("nightly-2", "hostB", "/runs/b"))
    first, second = db.attempts("e1")
    assert (first.run_tag, first.run_host, first.run_folder) == ("nightly-1", "hostA", "/runs/a")
    assert (second.run_tag, second.run_host) == ("nightly-2", "hostB")
    db.record_end("e1", 1, "ok")
    # Resuming per tag: the newest attempt of that tag on that host, whatever came later.
    assert db.latest_statuses("nightly-1", "hostA") == {"e1": "ok", "e2": "skipped"}
    assert db.latest_statuses("nightly-2", "hostB") == {"e1": STARTED}
    assert db.latest_statuses("nightly-1", "hostB") == {}
    assert db.latest_statuses() == {"e1": STARTED, "e2": "skipped"}
    # With the folder of the run that recorded each: where its logs are.
    assert db.latest_places("nightly-1", "hostA") == {"e1": ("ok", "/runs/a"),
                                                     "e2": ("skipped", "/runs/a")}
    assert db.latest_places() == {"e1": (STARTED, "/runs/b"), "e2": ("skipped", "/runs/a")}


def test_the_next_number_is_taken_in_the_write_itself(store_location: str) -> None:
    # Two runs start one experiment at the same moment: each gets a number of its own.
    numbers: list[int] = []
    errors: list[BaseException] = []

    def start(index: int) -> None:
        try:
            with open_store(store_location) as store:
                for _ in range(5):
                    numbers.append(store.record_start("shared", None, PARAMS,
                                                      run=("t", f"host{index}", "/f")))
        except BaseException as error:  # noqa: BLE001 - the assertion below names it
            errors.append(error)

    open_store(store_location).close()
    threads = [threading.Thread(target=start, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(numbers) == list(range(1, 21))


def test_a_claim_settles_what_the_run_may_settle(store_location: str) -> None:
    with open_store(store_location) as store:
        store.record_start("mine", 1, PARAMS, run=(None, "here", "/runs/a"))
        store.record_start("other-folder", 1, PARAMS, run=(None, "here", "/runs/b"))
        store.record_start("other-host", 1, PARAMS, job_id="42", run=(None, "there", "/runs/a"))
        with store.claim("here", ["/runs/a"]):
            unfinished = sorted(a.exp_id for a in store.unfinished())
            pending = sorted(a.exp_id for a in store.pending_jobs())
        if store.shared:   # PostgreSQL: each run settles its own (host, log folder)
            assert (unfinished, pending) == (["mine"], [])
        else:              # SQLite: one run at a time has the database, and settles it all
            assert (unfinished, pending) == (["mine", "other-folder"], ["other-host"])


def test_a_second_claim_of_the_same_scope_is_refused(store_location: str) -> None:
    with open_store(store_location) as first, open_store(store_location) as second:
        with first.claim("here", ["/runs/a"]):
            with pytest.raises(ResultsError, match="another dlbs run is using results "
                                                   "database") as error:
                with second.claim("here", ["/runs/a"]):
                    pass
            assert error.value.hint and ("exp.log_dir" in error.value.hint
                                         or "runtime.results_db" in error.value.hint)
            if first.shared:   # another log folder (or host) shares a PostgreSQL store
                with second.claim("here", ["/runs/b"]), second.claim("there", ["/runs/a"]):
                    pass
        with second.claim("here", ["/runs/a"]):   # released when the first run ended
            pass


@pytest.mark.postgres
def test_stores_in_two_schemas_of_one_database_lock_apart() -> None:
    # A schema is a store of its own (docs/results.md), and PostgreSQL's advisory locks belong
    # to the whole database: two test runs' stores with the same host and folder, on two
    # workers, refused each other's claims.
    with postgres_store_url() as one, postgres_store_url() as two, \
            open_store(one) as first, open_store(two) as second:
        with first.claim("here", ["/runs/a"]), second.claim("here", ["/runs/a"]):
            pass


def test_the_change_marker_moves_whenever_an_attempt_is_added_or_ends(
        store_location: str) -> None:
    """What `dlbs serve` compares before it answers from what it kept (dlbs/web/data.py)."""
    with open_store(store_location) as db:
        seen = [db.change_marker()]

        def moved() -> bool:
            seen.append(db.change_marker())
            return seen[-1] not in seen[:-1]

        db.record_start("e1", 1, PARAMS)
        assert moved()
        db.record_start("e2", 1, PARAMS)
        assert moved()
        db.set_job_id("e2", 1, "42")     # nothing a page shows from the columns
        assert db.change_marker() == seen[-1]
        db.record_end("e1", 1, "ok", results={"results.time_data": [1.0]})
        assert moved()
        # One ends while another starts: the open count is back, the rowid is not.
        db.record_end("e2", 1, "failure")
        db.record_start("e3", 1, PARAMS)
        assert moved()
        db.record_attempt("e4", None, PARAMS, "skipped")
        assert moved()
        db.record_attempts([Attempt("e5", 1, "ok", None, PARAMS, {}, None, {}, None,
                                    "2026-01-01T00:00:00+00:00", "2026-01-01T00:01:00+00:00")])
        assert moved()
        with open_store(store_location, read_only=True) as reader:
            assert reader.change_marker() == seen[-1]


def test_attempts_are_read_back_whole_in_chunks(db: ResultsStore) -> None:
    items = [Attempt(f"e{i:03d}", 1, "ok" if i % 2 else "failure", None, dict(PARAMS, i=i),
                     {"results.time_data": [1.0, 2.0, float(i)]}, f"e{i}.log", {"host": "h"},
                     None, "2026-01-01T10:00:00.000+00:00", "2026-01-01T10:01:00.000+00:00",
                     run_tag="t", run_host="h", run_folder="/f") for i in range(25)]
    assert db.record_attempts(items) == 25
    db.record_start("open", 1, PARAMS)
    read = list(db.iter_attempts(chunk=7))
    assert [a.exp_id for a in read] == [a.exp_id for a in items]
    assert read[3].params == items[3].params and read[3].results == items[3].results
    assert (read[3].run_tag, read[3].run_host, read[3].run_folder) == ("t", "h", "/f")
    assert read[3].summary["results.time_median"] == 2.0
    assert len(list(db.iter_attempts(ended_only=False))) == 26


def test_text_keeps_what_postgresql_cannot_hold(db: ResultsStore) -> None:
    # PostgreSQL's text holds no NUL: it becomes U+FFFD there; everything else is exact.
    message = "bad byte \x00 here; ünïcödé; 'quotes' and ? and %s"
    db.record_attempt("e1", 1, dict(PARAMS, note="a\x00b"), "failure", status_msg=message)
    [attempt] = db.attempts("e1")
    expected = message.replace("\x00", "\ufffd") if db.shared else message
    assert attempt.status_msg == expected
    assert attempt.params["note"] == "a\x00b"   # JSON text escapes NUL: kept exactly


# -- kill -9 in the middle of writes -----------------------------------------------------

_WRITER = textwrap.dedent("""
    import sys
    from dlbs.results.store import open_store
    from dlbs.run.oom_limits import record_oom

    path, first = sys.argv[1], int(sys.argv[2])
    store = open_store(path)
    i = first
    while True:
        exp_id = f"e{i:06d}"
        params = {"exp.model": "resnet50", "exp.replica_batch": i, "exp.pad": "x" * 2000}
        store.record_start(exp_id, 1, params, log_path=f"logs/{exp_id}.log")
        print("started", i, flush=True)
        store.record_end(exp_id, 1, "ok" if i % 3 else "failure",
                         results={"results.time": float(i + 1), "results.time_data": [1.0] * 200})
        if i % 7 == 0:
            record_oom(store, ("pytorch", "gpu", "resnet50", "float32", "training"), 10**6 - i)
        print("ended", i, flush=True)
        i += 1
""")


def _run_writer_and_kill(path: str, first: int, kill_after: int) -> tuple[set[int], set[int]]:
    environment = dict(os.environ, PYTHONPATH=str(REPO))
    process = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), str(first)],
        stdout=subprocess.PIPE, text=True, env=environment,
    )
    started: set[int] = set()
    ended: set[int] = set()
    assert process.stdout is not None
    try:
        for line in process.stdout:
            word, number = line.split()
            (started if word == "started" else ended).add(int(number))
            if len(ended) >= kill_after:
                # SIGKILL while the writer is somewhere inside its next transactions.
                process.send_signal(signal.SIGKILL)
                break
    finally:
        process.kill()
        process.wait(timeout=30)
        process.stdout.close()
    assert process.returncode == -signal.SIGKILL
    return started, ended


def test_kill_9_mid_writes_keeps_every_commit_and_consistency(store_location: str) -> None:
    path = store_location
    all_started: set[int] = set()
    all_ended: set[int] = set()
    interrupted: set[int] = set()
    first = 0
    for kill_after in (40, 75, 130):
        started, ended = _run_writer_and_kill(path, first, kill_after)
        all_started |= started
        all_ended |= ended
        with open_store(path) as store:
            if not store.shared:
                assert store.integrity_check() == "ok"  # type: ignore[attr-defined]
            attempts = {int(a.exp_id[1:]): a for a in store.attempts()}
            # Nothing reported as committed is lost...
            assert all_started <= set(attempts)
            for number in all_ended:
                attempt = attempts[number]
                assert attempt.status == ("ok" if number % 3 else "failure")
                assert attempt.results["results.time"] == float(number + 1)
                assert len(attempt.results["results.time_data"]) == 200
                assert attempt.params["exp.replica_batch"] == number
            # ...and every row is whole: ended with its results, or started only.
            for number, attempt in attempts.items():
                if attempt.status == "interrupted":
                    assert number in interrupted and attempt.results == {}
                elif attempt.ended:
                    assert attempt.results["results.time"] == float(number + 1)
                else:
                    assert attempt.status is None and attempt.results == {}
            # At most the attempt in flight is open; the next run picks it up.
            assert len(store.unfinished()) <= 1
            # The OOM write follows record_end: it is there for every attempt reported
            # ended, and possibly for the one ended just before the kill.
            limit = oom_limit(store, ("pytorch", "gpu", "resnet50", "float32", "training"))
            reported = max(n for n in all_ended if n % 7 == 0)
            committed = max(n for n, a in attempts.items() if n % 7 == 0 and a.ended)
            assert limit is not None and 10**6 - committed <= limit <= 10**6 - reported
            for attempt in store.unfinished():
                interrupted.add(int(attempt.exp_id[1:]))
                store.record_end(attempt.exp_id, attempt.attempt, "interrupted",
                                 status_msg="dlbs was killed")
            first = max(attempts) + 1
    assert len(all_ended) >= 40 + 75 + 130


@pytest.mark.postgres
def test_reports_read_the_same_from_both_stores(tmp_path) -> None:
    from dlbs.report import Options, build_report, render
    from dlbs.results.sources import load_attempts

    items = []
    for index in range(40):
        params = dict(PARAMS, **{"exp.model": f"m{index % 4}",
                                 "exp.replica_batch": 8 << (index % 3),
                                 "exp.framework": "pytorch", "exp.device_type": "gpu",
                                 "runtime.run_tag": f"t{index // 20}",
                                 "note": "x" * (index * 50)})
        results = {"results.time_data": [10.0 + index % 7, 11.0, 12.5, 9.75],
                   "results.accuracy": "n/a" if index % 5 == 0 else index / 10,
                   "results.big": 2**70 + index}
        items.append(Attempt(f"e{index}", 1 + index // 20, "ok" if index % 9 else "failure",
                             None if index % 9 else "CUDA out of memory", params, results,
                             f"e{index}.log", {"gpu_model": "H100", "host": f"h{index % 2}"},
                             None, f"2026-01-01T10:{index:02d}:00.000+00:00",
                             f"2026-01-01T10:{index:02d}:30.000+00:00"))
    sqlite = str(tmp_path / "results.db")
    with postgres_store_url() as url:
        texts = []
        for location in (sqlite, url):
            with open_store(location) as store:
                store.record_attempts(items)
            attempts = load_attempts([location])
            texts.append([render(build_report(attempts, Options(kind=kind, columns=columns)),
                                 fmt)
                          for kind, columns, fmt in (
                              ("regular", ["time_median", "accuracy", "big"], "json"),
                              ("weak", None, "csv"), ("regular", None, "text"))])
            column = attempts.column("results.big")
            assert sorted(v for v in column.values if v is not None)[0] == 2**70
    assert texts[0] == texts[1]
