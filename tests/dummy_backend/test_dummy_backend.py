"""The `dummy` backend as the engine sees it: a program, its exit status and its log lines."""

from __future__ import annotations

import ast
import datetime
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from dlbs.results.protocol import ParsedLog, judge_status, parse_lines

PROGRAM = Path(__file__).resolve().parents[2] / "python" / "dummy_benchmarks" / "benchmarks.py"
# Python without site-packages (-S) and without the environment's PYTHON* settings (-I):
# the backend must run on the standard library alone, as in a bare container.
PYTHON = [sys.executable, "-I", "-S"]
FAST = ["--sleep", "0.01", "--num_batches", "4", "--num_warmup_batches", "2"]
RESULT_KEYS = {
    "results.time", "results.time_std", "results.time_median", "results.time_p90",
    "results.time_p95", "results.time_p99", "results.time_data", "results.warmup_time_data",
    "results.throughput", "results.mem_peak", "exp.model_title", "exp.framework_ver",
    "results.status", "results.start_time", "results.end_time",
    "results.timed_start", "results.timed_end",  # the energy's interval (docs/efficiency.md)
}
# It fails midway through its timed batches: after it marked their start, before their end.
FAILURE_KEYS = {"results.start_time", "exp.model_title", "exp.framework_ver",
                "results.status", "results.status_msg", "results.end_time",
                "results.timed_start"}


@dataclass
class Run:
    """One finished run of the backend."""

    returncode: int
    stdout: bytes
    stderr: str
    log: ParsedLog
    wall: float

    @property
    def values(self) -> dict:
        return self.log.values


def run_dummy(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> Run:
    """Run the backend to the end (with `env` added to a clean environment)."""
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("WORLD_SIZE", "RANK", "SLURM_NTASKS", "SLURM_PROCID")}
    full_env.update(env or {})
    began = time.monotonic()
    done = subprocess.run([*PYTHON, str(PROGRAM), *args], capture_output=True, env=full_env,
                          timeout=timeout)
    wall = time.monotonic() - began
    return Run(done.returncode, done.stdout, done.stderr.decode(errors="replace"),
               parse_lines(done.stdout.splitlines()), wall)


def test_a_run_prints_every_result_key():
    run = run_dummy("--model", "resnet50", "--batch_size", "32", *FAST)
    assert run.returncode == 0, run.stderr
    values = run.values
    assert set(values) == RESULT_KEYS
    assert run.log.unparsable == 0
    assert values["results.status"] == "ok"
    assert values["exp.model_title"] == "ResNet50"
    assert values["exp.framework_ver"].startswith("dummy ")
    assert len(values["results.time_data"]) == 4
    assert len(values["results.warmup_time_data"]) == 2
    assert values["results.throughput"] == pytest.approx(32 * 1000 / values["results.time"])
    assert 1 < values["results.mem_peak"] < 200  # a small interpreter's resident memory
    start = datetime.datetime.fromisoformat(values["results.start_time"])
    end = datetime.datetime.fromisoformat(values["results.end_time"])
    assert start.tzinfo is not None and start < end
    # Chatter, as a framework prints, is there too.
    assert run.log.lines > run.log.matched


def test_statistics_are_those_of_the_batch_times():
    run = run_dummy("--sleep", "0.002", "--num_batches", "37", "--num_warmup_batches", "0")
    values = run.values
    data = values["results.time_data"]
    percentiles = statistics.quantiles(data, n=100, method="inclusive")
    assert values["results.time"] == pytest.approx(statistics.fmean(data))
    assert values["results.time_std"] == pytest.approx(statistics.pstdev(data))
    assert values["results.time_median"] == pytest.approx(statistics.median(data))
    assert values["results.time_p90"] == pytest.approx(percentiles[89])
    assert values["results.time_p95"] == pytest.approx(percentiles[94])
    assert values["results.time_p99"] == pytest.approx(percentiles[98])
    assert values["results.warmup_time_data"] == []


@pytest.mark.serial  # times against known sleeps: alone on the machine
def test_batch_times_are_measured():
    # Another program's load can only make a batch longer than its sleep, never shorter; so
    # the best of three runs tells a backend that misreports from a machine that is busy.
    means = []
    for _ in range(3):
        run = run_dummy("--sleep", "0.05", "--num_batches", "10", "--num_warmup_batches", "2")
        values = run.values
        batches = [*values["results.warmup_time_data"], *values["results.time_data"]]
        assert len(batches) == 12
        assert all(t >= 50.0 for t in batches)  # a sleep is never shorter
        assert sum(batches) / 1000 < run.wall  # the times fit in the run: not made up
        means.append(values["results.time"])
        if values["results.time"] == pytest.approx(50.0, rel=0.10):
            break
    assert min(means) == pytest.approx(50.0, rel=0.10)


@pytest.mark.serial  # CPU time against a known burn: alone on the machine
def test_busy_batches_burn_cpu():
    process = subprocess.Popen([*PYTHON, str(PROGRAM), "--busy", "--sleep", "0.1",
                                "--num_batches", "3", "--num_warmup_batches", "0"],
                               stdout=subprocess.PIPE)
    stdout = process.stdout.read()
    process.stdout.close()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)  # already reaped by wait4
    assert process.returncode == 0
    assert parse_lines(stdout.splitlines()).values["results.time"] == pytest.approx(100, rel=0.1)
    # 0.3 s of spinning; on a loaded machine it gets only its share of a core.
    assert usage.ru_utime + usage.ru_stime >= 0.1


def test_memory_is_allocated_and_reported():
    run = run_dummy("--memory_mib", "120", *FAST)
    assert run.values["results.mem_peak"] >= 120


@pytest.mark.parametrize(
    ("flags", "phase"),
    [
        (["--forward_only"], "inference"),
        (["--forward_only", "yes"], "inference"),
        (["--forward_only=on"], "inference"),
        (["--forward_only", "1"], "inference"),
        (["--forward_only=TRUE"], "inference"),
        (["--forward_only", "off"], "training"),
        (["--forward_only=no"], "training"),
        (["--forward_only", "0"], "training"),
        (["--forward_only", "false"], "training"),
        ([], "training"),
    ],
)
def test_boolean_flags(flags, phase):
    run = run_dummy(*flags, *FAST)
    assert run.returncode == 0, run.stderr
    assert f"phase={phase}".encode() in run.stdout


def test_flags_in_both_spellings_are_recorded():
    run = run_dummy("--model=vgg16", "--batch_size=8", "--device", "gpu", "--dtype=float16",
                    "--num_gpus=4", "--data_dir", "/data with spaces", "--num_threads", "3",
                    *FAST)
    assert run.returncode == 0, run.stderr
    chatter = run.stdout.decode()
    for fact in ("model=vgg16", "batch_size=8", "device=gpu", "dtype=float16", "num_gpus=4",
                 "data_dir='/data with spaces'", "num_threads=3"):
        assert fact in chatter
    assert run.values["exp.model_title"] == "VGG16"
    assert run.values["results.throughput"] == pytest.approx(8000 / run.values["results.time"])


def test_an_unknown_model_is_titled_by_its_id():
    assert run_dummy("--model", "my_net", *FAST).values["exp.model_title"] == "my_net"


@pytest.mark.parametrize(
    ("flags", "names"),
    [
        (["--bogus", "1"], "--bogus"),
        (["--batch", "4"], "--batch"),  # no prefix matching
        (["--batch_size", "four"], "--batch_size"),
        (["--batch_size", "0"], "--batch_size"),
        (["--num_batches", "0"], "--num_batches"),
        (["--num_warmup_batches", "-1"], "--num_warmup_batches"),
        (["--sleep", "-0.5"], "--sleep"),
        (["--sleep", "inf"], "--sleep"),
        (["--forward_only", "maybe"], "--forward_only"),
        (["--device", "tpu"], "--device"),
        (["--dtype", "float64"], "--dtype"),
        (["--fail", "sometimes"], "--fail"),
        (["--model", ""], "--model"),
        (["--num_gpus", "-2"], "--num_gpus"),
    ],
)
def test_bad_flags(flags, names):
    run = run_dummy(*flags)
    assert run.returncode == 2
    error_lines = run.stderr.strip().splitlines()
    assert len(error_lines) == 1 and error_lines[0].startswith("benchmarks.py: error:")
    assert "Traceback" not in run.stderr
    assert names in error_lines[0]
    assert run.values["results.status"] == "failure"
    assert run.values["results.status_msg"].startswith("bad command line: ")
    assert names in run.values["results.status_msg"]
    assert "results.throughput" not in run.values


def test_help():
    run = run_dummy("--help")
    assert run.returncode == 0 and b"--fail" in run.stdout


# ---- distributed: only rank 0 prints results ------------------------------------------------

def test_rank_zero_of_two_reports_for_the_job():
    run = run_dummy("--batch_size", "16", *FAST, env={"WORLD_SIZE": "2", "RANK": "0"})
    assert set(run.values) == RESULT_KEYS
    assert run.values["results.throughput"] == pytest.approx(
        16 * 2 * 1000 / run.values["results.time"])


@pytest.mark.parametrize("env", [{"WORLD_SIZE": "2", "RANK": "1"},
                                 {"SLURM_NTASKS": "4", "SLURM_PROCID": "3"}])
def test_other_ranks_print_no_results(env):
    run = run_dummy(*FAST, env=env)
    assert run.returncode == 0
    assert run.values == {}
    assert b"batch 4/4" in run.stdout  # it did run its batches


def test_a_failing_rank_says_so():
    run = run_dummy("--fail", "exit", *FAST, env={"WORLD_SIZE": "2", "RANK": "1"})
    assert run.returncode == 1
    assert run.values["results.status"] == "failure"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not an integer"),
        ({"WORLD_SIZE": "2", "RANK": "2"}, "RANK=2 is outside WORLD_SIZE=2"),
        ({"WORLD_SIZE": "0"}, "outside WORLD_SIZE=0"),
    ],
)
def test_a_bad_topology(env, message):
    run = run_dummy(*FAST, env=env)
    assert run.returncode == 2
    assert run.values["results.status_msg"].startswith("bad environment: ")
    assert message in run.values["results.status_msg"]
    assert message in run.stderr


# ---- failures on request --------------------------------------------------------------------

def test_fail_exit():
    run = run_dummy("--fail", "exit", *FAST)
    assert run.returncode == 1
    assert set(run.values) == FAILURE_KEYS
    assert run.values["results.status"] == "failure"
    assert "requested failure" in run.values["results.status_msg"]


@pytest.mark.parametrize(("device", "wording"), [("gpu", "CUDA out of memory"),
                                                 ("cpu", "DefaultCPUAllocator")])
def test_fail_oom(device, wording):
    run = run_dummy("--fail", "oom", "--device", device, *FAST)
    assert run.returncode == 1
    assert set(run.values) == FAILURE_KEYS
    message = run.values["results.status_msg"]
    assert run.values["results.status"] == "failure"
    assert message.startswith("out of memory: ") and wording in message


def test_fail_crash():
    run = run_dummy("--fail", "crash", *FAST)
    assert run.returncode == 1
    assert "Traceback (most recent call last)" in run.stderr
    assert "RuntimeError: dummy backend: requested crash" in run.stderr
    assert "results.status" not in run.values and "results.time" not in run.values
    assert judge_status(run.values)["results.status"] == "failure"


@pytest.mark.parametrize("mode, signum", [("kill", signal.SIGKILL), ("segv", signal.SIGSEGV)])
def test_fail_by_signal(mode, signum):
    run = run_dummy("--fail", mode, *FAST)
    assert run.returncode == -signum
    assert b"failing as asked" in run.stdout  # it died midway, after some output
    assert "results.status" not in run.values and "results.throughput" not in run.values
    assert judge_status(run.values)["results.status"] == "failure"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_fail_hang_until_a_signal(signum):
    process = subprocess.Popen([*PYTHON, str(PROGRAM), "--fail", "hang", *FAST],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = []
    for line in process.stdout:  # wait until it hangs
        lines.append(line)
        if b"failing as asked" in line:
            break
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=0.5)  # it does hang
    began = time.monotonic()
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=5)
    assert time.monotonic() - began < 1.0
    assert process.returncode == -signum  # it dies by the signal, as if it had no handler
    values = parse_lines([*lines, *stdout.splitlines()]).values
    assert values["results.status"] == "failure"
    assert values["results.status_msg"] == f"terminated by {signal.Signals(signum).name}"


def test_fail_garbage_still_gives_the_results():
    run = run_dummy("--fail", "garbage", "--seed", "7", *FAST)
    assert run.returncode == 0
    assert set(run.values) == RESULT_KEYS
    assert run.values["results.status"] == "ok"
    assert len(run.values["results.time_data"]) == 4
    assert run.values["results.time"] > 0 and run.values["results.throughput"] > 0
    assert run.log.unparsable >= 6  # malformed protocol lines were printed and skipped
    with pytest.raises(UnicodeDecodeError):
        run.stdout.decode("utf-8")  # not even text
    assert max(len(line) for line in run.stdout.split(b"\n")) >= 256 * 1024
    assert run.stderr  # junk there too


def test_garbage_is_reproducible_with_a_seed():
    first, second, other = (
        run_dummy("--fail", "garbage", "--seed", seed, "--sleep", "0", "--num_batches", "2")
        for seed in ("3", "3", "4")
    )
    assert first.stderr == second.stderr != other.stderr  # stderr holds only junk


def test_no_failure_mode_reports_a_throughput():
    for mode in ("exit", "oom", "crash", "kill", "segv"):
        run = run_dummy("--fail", mode, *FAST)
        assert run.returncode != 0 and "results.throughput" not in run.values, mode


def test_runs_under_the_system_python3():
    python3 = "/usr/bin/python3"
    if not os.path.exists(python3):
        python3 = "python3"
    done = subprocess.run([python3, "-I", "-S", str(PROGRAM), *FAST], capture_output=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert parse_lines(done.stdout.splitlines()).values["results.status"] == "ok"


def test_the_program_is_python_3_8_grammar():
    # It runs in containers whose python3 may be older than the one dlbs needs.
    ast.parse(PROGRAM.read_text(), feature_version=(3, 8))
