"""`dlbs run` with the dummy backend on bare metal: results, resume, faults, OOM, interrupts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlbs.results.protocol import parse_log
from dlbs.results.sources import load_experiments
from tests.run.conftest import attempts

DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=3", "-P", "exp.num_warmup_batches=1",
         "-P", "dummy.sleep=0.01"]


def statuses(db: Path) -> list[str]:
    return [row[2] for row in attempts(db)]


def test_sweep_records_every_experiment(run_dlbs, tmp_path):
    result = run_dlbs("run", *DUMMY, "-V", 'exp.replica_batch=[2, 4, 8]')
    assert result.returncode == 0, result.stderr
    assert "3 ok" in result.stderr
    rows = attempts(tmp_path / "logs" / "results.db")
    assert [r[1:3] for r in rows] == [(1, "ok")] * 3
    logs = sorted((tmp_path / "logs").glob("*.log"))
    assert len(logs) == 3
    parsed = parse_log(logs[0]).values
    # The header holds every resolved parameter; the backend's lines follow.
    assert parsed["exp.framework"] == "dummy" and parsed["results.status"] == "ok"
    assert parsed["dummy.args"][0].startswith("--model")
    report = run_dlbs("report", "logs", "--type", "regular", "--format", "json")
    assert report.returncode == 0, report.stderr
    assert len(json.loads(report.stdout)["rows"]) == 3


def test_rerun_policies(run_dlbs, tmp_path):
    spec = [*DUMMY, "-V", 'exp.model=["good", "bad"]',
            "-E", '{"condition": {"exp.model": "bad"}, "parameters": {"dummy.fail": "exit"}}']
    first = run_dlbs("run", *spec)
    assert first.returncode == 1 and "1 ok" in first.stderr and "1 failure" in first.stderr
    # The same command again measures nothing and fails, as the sweep still does not work.
    never = run_dlbs("run", *spec, "--progress", "lines")
    assert never.returncode == 1, never.stderr
    lines = never.stderr.splitlines()
    assert "dlbs: 1 failed earlier, 1 unchanged" in lines
    assert any(line.startswith("  failed earlier: dummy bad ") and
               line.endswith("an earlier run recorded failure; not run again, as exp.rerun is "
                             "never") for line in lines), never.stderr
    assert lines[-1] == ("dlbs: 1 experiment failed in an earlier run and measured nothing "
                         "now; -P exp.rerun=onfail runs it again (dlbs report shows the "
                         "failures)")
    dry = run_dlbs("run", *spec, "--dry-run")
    assert dry.returncode == 0 and "1 already done" in dry.stdout and \
        "1 failed earlier (not run again: exp.rerun=onfail retries them)" in dry.stdout
    onfail = run_dlbs("run", *spec, "-P", "exp.rerun=onfail")
    assert onfail.returncode == 1 and "1 unchanged" in onfail.stderr
    always = run_dlbs("run", *spec, "-P", "exp.rerun=always")
    assert "1 ok" in always.stderr and "1 failure" in always.stderr
    db = tmp_path / "logs" / "results.db"
    assert sorted(r[1] for r in attempts(db)) == [1, 1, 2, 2, 3]
    # Retries write beside the first log, never over it.
    names = sorted(p.name for p in (tmp_path / "logs").glob("*bad*.log"))
    assert len(names) == 3 and any(".attempt3.log" in n for n in names)


def test_a_second_folder_with_the_same_store_tag_and_host_says_where_the_results_are(
        run_dlbs, tmp_path):
    shared = ["-P", f"runtime.results_db={tmp_path / 'shared.db'}", "-P", "runtime.run_tag=v1",
              "-V", 'exp.model=["a", "b"]', *DUMMY]
    first = run_dlbs("run", *shared, "-P", "exp.log_dir=one")
    assert first.returncode == 0 and "2 ok" in first.stderr, first.stderr
    second = run_dlbs("run", *shared, "-P", "exp.log_dir=two")
    assert second.returncode == 0 and second.stderr.splitlines()[-1] == "dlbs: 2 unchanged"
    assert (f"dlbs: 2 experiments already recorded by a run in {tmp_path / 'one'} (same results "
            f"store, run tag and host) were not run again: their logs are there (dlbs report "
            f"{tmp_path / 'one'}); a new runtime.run_tag measures them again") \
        in second.stderr.splitlines(), second.stderr
    again = run_dlbs("run", *shared, "-P", "exp.log_dir=one")
    assert "already recorded by a run in" not in again.stderr


@pytest.mark.parametrize("mode, status, message", [
    ("exit", "failure", "requested failure"),
    ("crash", "failure", "RuntimeError: dummy backend: requested crash"),
    ("kill", "failure", "SIGKILL"),
    ("segv", "failure", "SIG"),
    ("hang", "timeout", "timeout"),
])
def test_faults_are_recorded_and_the_sweep_goes_on(run_dlbs, tmp_path, mode, status, message):
    spec = [*DUMMY, "-P", "exp.timeout=3", "-V", f'dummy.fail=["{mode}", ""]']
    start = time.monotonic()
    result = run_dlbs("run", *spec)
    assert result.returncode == 1, result.stderr
    rows = attempts(tmp_path / "logs" / "results.db")
    assert [r[2] for r in rows] == [status, "ok"]
    assert message.lower() in (rows[0][3] or "").lower(), rows[0]
    assert time.monotonic() - start < 60


def test_garbage_output_still_parses(run_dlbs, tmp_path):
    result = run_dlbs("run", *DUMMY, "-P", "dummy.fail=garbage")
    assert result.returncode == 0, result.stderr
    assert statuses(tmp_path / "logs" / "results.db") == ["ok"]


def test_out_of_memory_is_remembered(run_dlbs, tmp_path):
    oom = '{"condition": {"exp.replica_batch": [16]}, "parameters": {"dummy.fail": "oom"}}'
    first = run_dlbs("run", *DUMMY, "-V", "exp.replica_batch=[8, 16, 32]", "-E", oom)
    assert first.returncode == 1
    db = tmp_path / "logs" / "results.db"
    assert statuses(db) == ["ok", "failure", "skipped"]
    assert "ran out of memory" in attempts(db)[2][3]
    # Kept across runs: a bigger batch is skipped at once, a smaller one runs.
    second = run_dlbs("run", *DUMMY, "-V", "exp.replica_batch=[4, 64]")
    assert second.returncode == 0
    assert statuses(db)[-2:] == ["ok", "skipped"]
    third = run_dlbs("run", *DUMMY, "-V", "exp.replica_batch=[64]",
                     "-P", "exp.ignore_past_errors=true")
    assert third.returncode == 0 and statuses(db)[-1] == "ok"


def test_out_of_memory_of_a_transformer_counts_tokens_within_its_class(run_dlbs, tmp_path):
    # Sequences: a replica holds batch x exp.seq_len tokens; exp.oom_class keeps apart what
    # fits differently (a model sharded over more GPUs).
    oom = '{"condition": {"exp.seq_len": [256]}, "parameters": {"dummy.fail": "oom"}}'
    first = run_dlbs("run", *DUMMY, "-P", "exp.replica_batch=2",
                     "-V", "exp.seq_len=[128, 256, 512]", "-E", oom)
    assert first.returncode == 1
    db = tmp_path / "logs" / "results.db"
    assert statuses(db) == ["ok", "failure", "skipped"]
    assert "replica batch 2 x 512 tokens (1024) >= 512, which ran out of memory" in \
        attempts(db)[2][3]
    second = run_dlbs("run", *DUMMY, "-P", "exp.replica_batch=1", "-V", "exp.seq_len=[384, 768]")
    assert statuses(db)[-2:] == ["ok", "skipped"], second.stderr
    other_class = run_dlbs("run", *DUMMY, "-P", "exp.replica_batch=1", "-P", "exp.seq_len=768",
                           "-P", "exp.oom_class=sharded over 4")
    assert other_class.returncode == 0 and statuses(db)[-1] == "ok"


def test_status_parameter_and_dry_run(run_dlbs, tmp_path):
    spec = [*DUMMY, "-V", 'exp.model=["a", "b", "c"]',
            "-E", '{"condition": {"exp.model": "b"}, "parameters": {"exp.status": "disabled"}}',
            "-E", '{"condition": {"exp.model": "c"}, "parameters": {"exp.status": "simulate"}}']
    dry = run_dlbs("run", *spec, "--dry-run", "--format", "json")
    assert dry.returncode == 0, dry.stderr
    records = [json.loads(line) for line in dry.stdout.splitlines()]
    assert [r["action"] for r in records] == ["run", "disabled", "simulate"]
    assert records[0]["target"] == "local" and "target" not in records[1]
    assert records[0]["argv"][1].endswith("python/dummy_benchmarks/benchmarks.py")
    assert not (tmp_path / "logs").exists()
    table = run_dlbs("run", *spec, "--dry-run")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["id", "action", "target", "framework", "model", "batch",
                                "GPUs", "log", "file"]
    assert [line.split()[1] for line in lines[1:4]] == ["run", "disabled", "simulate"]
    assert lines[-1] == ("dlbs: 3 experiments: 1 to run, 0 already done, 0 to skip, "
                         "1 disabled, 1 to simulate (--format json shows each exact request)")
    assert not (tmp_path / "logs").exists()
    real = run_dlbs("run", *spec)
    assert real.returncode == 0
    assert "simulate" in real.stderr and "1 ok" in real.stderr
    assert statuses(tmp_path / "logs" / "results.db") == ["ok"]
    again = run_dlbs("run", *spec, "--dry-run")
    assert again.stdout.splitlines()[-1].startswith("dlbs: 3 experiments: 0 to run, "
                                                    "1 already done,")


def test_run_a_plan_file(run_dlbs, tmp_path):
    planned = run_dlbs("plan", *DUMMY, "-V", "exp.replica_batch=[1, 2]", "-o", "plan.json")
    assert planned.returncode == 0
    result = run_dlbs("run", "--plan", "plan.json")
    assert result.returncode == 0 and "2 ok" in result.stderr
    both = run_dlbs("run", "--plan", "plan.json", "-P", "a=1")
    assert both.returncode == 2 and "--plan runs a plan as it was written" in both.stderr


def test_paths_with_spaces(run_dlbs, tmp_path):
    result = run_dlbs("run", *DUMMY, "-P", "exp.log_dir=my logs/run 1",
                      "-P", "exp.model=a model")
    assert result.returncode == 0, result.stderr
    (log,) = (tmp_path / "my logs" / "run 1").glob("*.log")
    assert parse_log(log).values["exp.model_title"] == "a model"


def test_second_run_on_the_same_logs_refuses(run_dlbs, tmp_path):
    slow = subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "run", *DUMMY,
                             "-P", "dummy.sleep=1.5"], cwd=tmp_path,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not list((tmp_path / "logs").glob("*.log")) and time.monotonic() < deadline:
            time.sleep(0.1)
        second = run_dlbs("run", *DUMMY)
        assert second.returncode == 2
        assert "another dlbs run is using logs" in second.stderr
    finally:
        slow.communicate(timeout=60)
    assert slow.returncode == 0


def _run_in_background(tmp_path: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "run", *args],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _wait_for_logs(tmp_path: Path, count: int) -> None:
    deadline = time.monotonic() + 60
    while len(list((tmp_path / "logs").glob("*.log"))) < count:
        assert time.monotonic() < deadline, "the sweep did not start"
        time.sleep(0.05)


def _started_after_one_ended(db: Path) -> bool:
    try:
        rows = attempts(db)
    except Exception:  # noqa: BLE001 - not created yet, or mid-creation
        return False
    return len(rows) == 2 and rows[0][2] == "ok" and rows[1][2] is None


def test_kill_9_of_dlbs_then_resume(run_dlbs, tmp_path):
    spec = [*DUMMY, "-P", "dummy.sleep=0.3", "-V", "exp.replica_batch=[1, 2, 3, 4]"]
    sweep = _run_in_background(tmp_path, *spec)
    db = tmp_path / "logs" / "results.db"
    deadline = time.monotonic() + 60
    # Kill once the first attempt ended and the second is recorded as started.
    while not _started_after_one_ended(db):
        assert time.monotonic() < deadline, "the sweep did not reach its second experiment"
        time.sleep(0.05)
    os.killpg(sweep.pid, signal.SIGKILL)
    sweep.communicate()
    before = attempts(db)
    assert before[0][2] == "ok" and before[-1][2] is None  # cut off mid-attempt
    result = run_dlbs("run", *spec)
    assert result.returncode == 0, result.stderr
    after = attempts(db)
    by_experiment: dict[str, list] = {}
    for exp_id, attempt, status, _ in after:
        by_experiment.setdefault(exp_id, []).append((attempt, status))
    assert len(by_experiment) == 4
    # Nothing that ended ran twice; the cut-off attempt is closed and run again.
    assert by_experiment[before[0][0]] == [(1, "ok")]
    assert by_experiment[before[-1][0]] == [(1, "interrupted"), (2, "ok")]
    assert sum(1 for rows in by_experiment.values() if rows[-1][1] == "ok") == 4


def test_ctrl_c_stops_cleanly(tmp_path):
    sweep = _run_in_background(tmp_path, *DUMMY, "-P", "dummy.sleep=1",
                               "-V", "exp.replica_batch=[1, 2]")
    deadline = time.monotonic() + 60
    # Interrupt once the backend itself runs (its first lines are in the log).
    while not any("dummy backend" in log.read_text(errors="replace")
                  for log in (tmp_path / "logs").glob("*.log")):
        assert time.monotonic() < deadline, "the backend did not start"
        time.sleep(0.05)
    os.killpg(sweep.pid, signal.SIGINT)
    _, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 130, err
    assert "interrupted" in err
    rows = attempts(tmp_path / "logs" / "results.db")
    assert [r[2] for r in rows] == ["interrupted"]


def test_bad_spec_runs_nothing(run_dlbs, tmp_path):
    result = run_dlbs("run", *DUMMY, "-P", "exp.gpus=0:1", "-P", "exp.framework=pytorch")
    assert result.returncode == 2 and "several GPUs in one replica" in result.stderr
    assert not (tmp_path / "logs").exists()
    missing = run_dlbs("run", *DUMMY, "-P", "runtime.launcher=no-such-numactl")
    assert missing.returncode == 2 and "'no-such-numactl' not found" in missing.stderr
    assert not list((tmp_path / "logs").glob("*.log")) if (tmp_path / "logs").exists() else True


def test_resource_monitor_series_are_recorded(run_dlbs, tmp_path):
    result = run_dlbs("run", *DUMMY, "-P", "dummy.sleep=0.4", "-P", "dummy.busy=true",
                      "-P", "monitor.frequency=0.1")
    assert result.returncode == 0, result.stderr
    import sqlite3

    with sqlite3.connect(tmp_path / "logs" / "results.db") as conn:
        (results,) = conn.execute("SELECT results FROM attempts").fetchone()
    results = json.loads(results)
    cpu = results["results.use.cpu"]
    # A sample taken at the backend's end mark after its process ended has no CPU reading
    # (NaN, stored as null: dlbs/monitor/sampling.py); the others measured the busy loop (a
    # sleeping backend reads about 0); how busy depends on the machine's load.
    measured = [value for value in cpu if value is not None]
    assert len(cpu) >= 5 and len(measured) >= len(cpu) - 2 and max(measured) > 10
    assert len(results["results.use.rss"]) == len(results["results.use.time"])
    assert "results.use.gpu_util" not in results  # no GPU here: the series is absent


def test_progress_bar_counts_done_failed_and_skipped(run_dlbs):
    result = run_dlbs("run", *DUMMY, "-V", "exp.replica_batch=[1, 2, 3]", "--progress", "bar",
                      "-E", '{"condition": {"exp.replica_batch": 2}, '
                            '"parameters": {"dummy.fail": "exit"}}')
    assert result.returncode == 1
    assert "3/3 ok 2 failed 1 skipped 0" in result.stderr
    assert "dlbs: 1 failure, 2 ok" in result.stderr


def test_a_store_that_fails_while_a_benchmark_runs_stops_nothing_that_runs(
        tmp_path, monkeypatch, capsys):
    """A store that fails on the running attempt's process mark stops nothing that runs.

    That benchmark runs to its end (and is recorded: the store works again by then), nothing
    more starts, and the store's error ends the run.
    """
    from dlbs.cli.main import main
    from dlbs.errors import ResultsError
    from dlbs.results.store_writes import StoreWrites

    def lost(self, exp_id, attempt, job_id):
        raise ResultsError(f"results database {self.location}: cannot record: disk I/O error")

    monkeypatch.setattr(StoreWrites, "set_job_id", lost)
    status = main(["run", *DUMMY, "-P", f"exp.log_dir={tmp_path / 'logs'}", "-P",
                   "exp.num_batches=20", "-V", 'exp.replica_batch=[2, 4, 8]'])
    stderr = capsys.readouterr().err
    errors = [line for line in stderr.splitlines() if line.startswith("dlbs: error:")]
    assert status == 2 and len(errors) == 1, stderr
    assert "cannot record: disk I/O error" in errors[0] and "those running finish" in stderr
    [log] = list((tmp_path / "logs").glob("*.log"))
    [experiment] = load_experiments([str(log)]).experiments
    assert experiment["results.status"] == "ok" and experiment["results.time_count"] == 20
    assert statuses(tmp_path / "logs" / "results.db") == ["ok"]
