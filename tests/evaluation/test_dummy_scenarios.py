"""LoadGen's numbers against known service times: the dummy backend sleeps `--sleep` a batch.

A batch never takes less than its sleep, and a loaded 2-core machine may make it take more,
so each bound below is what the scenario's arithmetic allows, with room above for a slow
machine, never a tight time bound.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from benchmark_common import harness
from evaluation_helpers import BACKENDS, backend_env, run_backend

SERVICE_S = 0.02  # seconds per batch
BATCH = 4
CAPACITY = BATCH / SERVICE_S  # samples per second when batches run back to back
QUICK = ["--sleep", str(SERVICE_S), "--batch_size", str(BATCH), "--num_warmup_batches", "1",
         "--min_duration_s", "0.5", "--min_query_count", "10"]


def scenario(tmp_path: Path, name: str, *flags: str):
    run = run_backend("dummy", "--scenario", name, *QUICK, "--loadgen_dir",
                      str(tmp_path / "loadgen"), *flags)
    assert run.returncode == 0, run.stderr + run.stdout
    assert run.values["results.status"] == "ok"
    return run.values


@pytest.mark.serial  # latencies against known service times
def test_single_stream_latency_is_the_service_time(tmp_path):
    values = scenario(tmp_path, "single_stream")
    service_ms = SERVICE_S * 1000
    assert service_ms <= values["results.latency_p50"] < 1.5 * service_ms
    assert values["results.latency_p50"] <= values["results.latency_p90"] <= \
        values["results.latency_p99"] <= values["results.latency_p999"]
    # One sample per query, back to back: the rate is one over the latency.
    assert values["results.qps"] == pytest.approx(1000 / values["results.latency_mean"], rel=0.1)
    assert values["results.num_samples"] >= 10
    assert values["results.throughput"] == values["results.qps"]
    for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_trace.json"):
        assert (tmp_path / "loadgen" / name).is_file(), name
    assert values["results.loadgen_log_dir"] == str(tmp_path / "loadgen")


def test_multi_stream_query_is_one_batch(tmp_path):
    values = scenario(tmp_path, "multi_stream")
    assert SERVICE_S * 1000 <= values["results.latency_p50"] < 1.5 * SERVICE_S * 1000
    assert values["results.num_samples"] % BATCH == 0
    assert values["results.qps"] <= CAPACITY * 1.01


@pytest.mark.serial  # latencies against known service times
def test_offline_rate_is_batch_over_service_time(tmp_path):
    values = scenario(tmp_path, "offline")
    # LoadGen's run is the timed interval the monitor's energy covers (docs/efficiency.md).
    start, end = (datetime.fromisoformat(values[key])
                  for key in ("results.timed_start", "results.timed_end"))
    assert 0 < (end - start).total_seconds() < 60
    assert 0.6 * CAPACITY < values["results.qps"] <= CAPACITY * 1.01
    # The expected rate was measured first, so LoadGen ran for at least the minimum duration.
    assert values["results.loadgen_valid"] is True


@pytest.mark.serial  # latencies against known service times
def test_server_below_capacity_meets_its_bound(tmp_path):
    rate = 0.2 * CAPACITY
    values = scenario(tmp_path, "server", "--target_qps", str(rate), "--latency_bound_ms", "500")
    assert values["results.target_qps"] == rate
    assert values["results.latency_bound_met"] is True
    # A query waits at most for the batch in service, then is served in the next one.
    assert SERVICE_S * 1000 <= values["results.latency_p50"] < 3 * SERVICE_S * 1000
    assert values["results.qps"] == pytest.approx(rate, rel=0.5)


def test_server_above_capacity_breaks_its_bound(tmp_path):
    values = scenario(tmp_path, "server", "--target_qps", str(3 * CAPACITY),
                      "--latency_bound_ms", str(2 * SERVICE_S * 1000))
    assert values["results.latency_bound_met"] is False
    assert values["results.qps"] <= CAPACITY * 1.01


@pytest.mark.serial  # latencies against known service times
def test_max_qps_finds_the_capacity(tmp_path):
    bound_ms = 200.0
    duration_s = 0.5
    run = run_backend("dummy", "--scenario", "max_qps", *QUICK, "--latency_bound_ms",
                      str(bound_ms), "--min_duration_s", str(duration_s),
                      "--loadgen_dir", str(tmp_path / "lg"))
    assert run.returncode == 0, run.stderr + run.stdout
    values = run.values
    # The first trial is 0.9 of the measured rate of full batches (CAPACITY, or less on a
    # slow machine); the search then goes up while the bound holds.
    assert "max_qps: trial 1: " in run.stdout
    first = float(run.stdout.split("max_qps: trial 1: ")[1].split(" ")[0])
    assert first <= 0.9 * CAPACITY * 1.01
    # Above the capacity the queue grows by (rate - capacity) x duration, which the bound
    # tolerates only while that backlog drains within it.
    assert 0.3 * CAPACITY < values["results.max_qps"] < \
        CAPACITY * (1 + bound_ms / 1000 / duration_s) * 1.1
    assert values["results.target_qps"] == values["results.max_qps"]
    assert values["results.latency_bound_met"] is True
    assert values["results.latency_p99"] <= bound_ms
    trials = values["results.max_qps_trials"]
    assert 2 <= trials <= harness.MAX_QPS_TRIALS
    assert run.stdout.count("max_qps: trial ") == trials
    # Each trial keeps its logs; LoadGen's own names hold the reported trial's.
    folder = tmp_path / "lg"
    details = sorted(folder.glob("trial*_mlperf_log_detail.txt"))
    assert len(details) == trials
    reported = [path for path in details
                if path.read_bytes() == (folder / "mlperf_log_detail.txt").read_bytes()]
    assert len(reported) == 1


@pytest.mark.serial  # latencies against known service times
def test_max_qps_steps_down_from_a_rate_that_breaks_the_bound(tmp_path):
    # A bound just above the service time: 0.9 of the rate one sample at a time can serve
    # (batch 1) queues and breaks it, so lower rates are tried, their logs kept.
    run = run_backend("dummy", "--scenario", "max_qps", "--sleep", "0.02", "--batch_size", "1",
                      "--min_duration_s", "0.4", "--min_query_count", "5",
                      "--latency_bound_ms", "30", "--loadgen_dir", str(tmp_path / "lg"))
    assert run.returncode == 0, run.stderr + run.stdout
    assert "bound broken" in run.stdout
    assert (tmp_path / "lg" / "trial1_mlperf_log_detail.txt").is_file()
    assert run.values["results.max_qps"] < 50  # one 20 ms batch of one sample at a time


def test_max_qps_that_no_rate_can_meet_ends_in_one_line(tmp_path):
    # A bound below the service time: every rate breaks it. The search stops at the lowest
    # rate that can still fill a trial (5 queries in 2 x 0.2 s: 12.5/s), not after hours.
    began = time.monotonic()
    run = run_backend("dummy", "--scenario", "max_qps", "--sleep", "0.02", "--batch_size", "1",
                      "--min_duration_s", "0.2", "--min_query_count", "5",
                      "--latency_bound_ms", "10", "--loadgen_dir", str(tmp_path / "lg"))
    assert run.returncode == 1
    message = run.values["results.status_msg"]
    assert "the bound cannot be met" in message and "\n" not in message
    # 0.9 x 50/s, then x 0.6 each: about 45, 27, 16 queries/s; 9.7/s is below 12.5/s.
    assert "at every rate tried (3 trial(s), " in message, message
    assert time.monotonic() - began < 60
    assert "results.max_qps" not in run.values


def test_each_run_keeps_its_own_loadgen_folder(tmp_path):
    # A rerun given the same folder (a retried attempt) writes beside the first run's logs.
    folder = tmp_path / "exp.loadgen"
    first = scenario(tmp_path, "single_stream", "--loadgen_dir", str(folder))
    second = scenario(tmp_path, "single_stream", "--loadgen_dir", str(folder))
    assert first["results.loadgen_log_dir"] == str(folder)
    assert second["results.loadgen_log_dir"] == str(tmp_path / "exp.attempt2.loadgen")
    for values in (first, second):
        detail = Path(values["results.loadgen_log_dir"], "mlperf_log_detail.txt")
        assert detail.is_file()
    assert (folder / "mlperf_log_detail.txt").read_bytes() != \
        (tmp_path / "exp.attempt2.loadgen" / "mlperf_log_detail.txt").read_bytes()
    # A file in the way is passed over, never written into.
    (tmp_path / "exp.attempt3.loadgen").write_text("not a folder")
    third = scenario(tmp_path, "single_stream", "--loadgen_dir", str(folder))
    assert third["results.loadgen_log_dir"] == str(tmp_path / "exp.attempt4.loadgen")
    assert (tmp_path / "exp.attempt3.loadgen").read_text() == "not a folder"


def served(stdout: str) -> float:
    """The mean batch of the harness's 'served N batches, X samples each' line."""
    line = next(line for line in stdout.splitlines() if line.startswith("served "))
    return float(line.split(", ")[1].split(" ")[0])


def test_queue_delay_gathers_queries_into_batches(tmp_path):
    common = ["--scenario", "server", "--sleep", "0.001", "--batch_size", "8",
              "--target_qps", "100", "--latency_bound_ms", "500", "--min_duration_s", "1",
              "--min_query_count", "50"]
    alone = run_backend("dummy", *common, "--loadgen_dir", str(tmp_path / "a"))
    held = run_backend("dummy", *common, "--max_queue_delay_ms", "40",
                       "--loadgen_dir", str(tmp_path / "b"))
    assert alone.returncode == 0 and held.returncode == 0, alone.stderr + held.stderr
    # 1 ms batches at 100 queries/s: each query is served alone unless it is held; held
    # 40 ms, about four more arrive meanwhile.
    assert served(alone.stdout) < 1.5
    assert served(held.stdout) > 2.5
    # The first query of a held batch waits the whole delay, the last ones hardly at all.
    assert held.values["results.latency_p99"] >= 35
    assert held.values["results.latency_p50"] > 10 > alone.values["results.latency_p50"]


@pytest.mark.parametrize("flags", [["--device", "gpu", "--num_gpus", "4"],
                                   ["--inference_streams", "4"]])
def test_lanes_multiply_the_offline_rate(tmp_path, flags):
    # The dummy's devices (or streams) are lanes that each sleep their batch's time: the
    # harness's dispatch over four of them serves four batches at once.
    one = scenario(tmp_path / "one", "offline")
    four = scenario(tmp_path / "four", "offline", *flags)
    assert 3.0 * one["results.qps"] < four["results.qps"] <= 4 * CAPACITY * 1.01
    assert four["results.recompiles"] == 0


def test_accuracy_classifies_every_sample_once(tmp_path):
    predictions = tmp_path / "out" / "predictions.jsonl"
    values = scenario(tmp_path, "accuracy", "--num_samples", "1000", "--sleep", "0",
                      "--predictions_file", str(predictions))
    # The dummy ranks the true class second for every fourth sample (i % 4 == 3).
    assert values["results.top1"] == 0.75
    assert values["results.top5"] == 1.0
    assert values["results.num_samples"] == 1000
    assert values["results.predictions_file"] == str(predictions)
    lines = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert [line["sample"] for line in lines] == list(range(1000))
    assert lines[3]["label"] == 3 and lines[3]["top"][1]["class"] == 3
    assert len(lines[0]["top"]) == 5
    # LoadGen's own accuracy log holds each answer too: the top-5 classes as int32.
    log = json.loads((tmp_path / "loadgen" / "mlperf_log_accuracy.json").read_text())
    assert sorted(entry["qsl_idx"] for entry in log) == list(range(1000))


def test_accuracy_over_several_loads_of_the_library(tmp_path):
    # More samples than are resident at once (1024): LoadGen loads the library in parts.
    values = scenario(tmp_path, "accuracy", "--num_samples", "2500", "--sleep", "0",
                      "--batch_size", "64")
    assert values["results.num_samples"] == 2500
    assert values["results.top1"] == pytest.approx(0.75, abs=1 / 2500)


@pytest.mark.parametrize(("flags", "message"), [
    (["--scenario", "server"], "--target_qps > 0"),
    (["--scenario", "max_qps", "--latency_bound_ms", "0"], "--latency_bound_ms > 0"),
    (["--scenario", "offline", "--latency_percentile", "100"], "--latency_percentile"),
    (["--scenario", "offline", "--num_samples", "0"], "--num_samples"),
    (["--scenario", "warp"], "invalid choice"),
    (["--predict", "x.jpg", "--scenario", "offline"], "--predict"),
])
def test_bad_evaluation_flags_are_one_line(flags, message):
    run = run_backend("dummy", *flags)
    assert run.returncode == 2
    assert message in run.stderr and "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1
    assert run.values["results.status"] == "failure"


def test_benchmark_mode_runs_without_loadgen_or_site_packages(tmp_path):
    # The evaluation flags are parsed by benchmark_common (standard library): the dummy's
    # own loop still runs on a bare python3.
    done = subprocess.run([sys.executable, "-I", "-S", str(BACKENDS["dummy"]), "--sleep", "0",
                           "--num_batches", "2"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert '__results.status__="ok"' in done.stdout


def test_a_scenario_without_loadgen_says_how_to_install_it():
    done = subprocess.run([sys.executable, "-I", "-S", str(BACKENDS["dummy"]), "--scenario",
                           "offline"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "pip install mlcommons-loadgen==6.0.17" in done.stderr
    assert "Traceback" not in done.stderr


def test_sigterm_while_loadgen_runs_ends_in_a_failure(tmp_path):
    # LoadGen holds the main thread in C++ (no Python handler can run there): the harness's
    # watcher must still report the signal, at once.
    process = subprocess.Popen(
        [sys.executable, str(BACKENDS["dummy"]), "--scenario", "server", "--target_qps", "5",
         "--latency_bound_ms", "1000", "--sleep", "0.01", "--min_duration_s", "600",
         "--loadgen_dir", str(tmp_path / "lg")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=backend_env())
    # LoadGen has started once its detail log exists.
    detail = tmp_path / "lg" / "mlperf_log_detail.txt"
    for _ in range(600):
        if detail.exists() and detail.stat().st_size > 0:
            break
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode != 0
    assert '__results.status__="failure"' in stdout
    assert "terminated by SIGTERM" in stdout, stdout + stderr


def test_an_overloaded_server_run_says_why_it_is_invalid(tmp_path):
    # Twice what the system serves, under a bound of two batches: LoadGen's latency check
    # fails, and the backend records that reason beside the verdict.
    values = scenario(tmp_path, "server", "--target_qps", str(2 * CAPACITY),
                      "--latency_bound_ms", str(2 * SERVICE_S * 1000))
    assert values["results.loadgen_valid"] is False
    assert "latency bound not met" in values["results.loadgen_invalid_reasons"]


def test_invalid_reasons_name_each_failed_check(tmp_path):
    from benchmark_common.loadgen_log import DETAIL_LOG, LoadGenLog

    lines = [("result_validity", "INVALID"), ("result_min_duration_met", False),
             ("result_min_queries_met", True), ("early_stopping_met", False),
             ("early_stopping_result", " * Only processed 10 queries.\n")]
    (tmp_path / DETAIL_LOG).write_text("".join(
        ":::MLLOG " + json.dumps({"key": key, "value": value}) + "\n" for key, value in lines))
    found = LoadGenLog(str(tmp_path)).results()
    assert found["results.loadgen_valid"] is False
    assert found["results.loadgen_invalid_reasons"] == [
        "min duration not met", "early stopping's percentile bound not met",
        "early stopping: * Only processed 10 queries."]
    (tmp_path / DETAIL_LOG).write_text(
        ":::MLLOG " + json.dumps({"key": "result_validity", "value": "VALID"}) + "\n")
    assert "results.loadgen_invalid_reasons" not in LoadGenLog(str(tmp_path)).results()
