"""benchmarks.py as dlbs runs it: training and inference, the log protocol, failures."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta

import pytest
from mx_helpers import BENCHMARKS, backend_env, parse_protocol
from mxnet_benchmarks import benchmarks

pytestmark = pytest.mark.mxnet

# The keys every successful run prints (the same as the PyTorch backend's).
OK_KEYS = {
    "exp.model_title", "exp.framework_ver", "results.start_time", "results.end_time",
    "results.warmup_time_data", "results.time", "results.time_std", "results.time_median",
    "results.time_p90", "results.time_p95", "results.time_p99", "results.time_data",
    "results.throughput", "results.mem_peak", "results.status",
    "results.timed_start", "results.timed_end", "results.flops_unavailable",
}


def assert_ok(run, batch: int, batches: int, warmup: int, title: str) -> dict:
    assert run.returncode == 0, run.stderr[-3000:]
    values = run.values
    assert OK_KEYS <= set(values), set(values)
    assert values["results.status"] == "ok"
    assert values["exp.model_title"] == title
    assert values["exp.framework_ver"] == "1.9.1"
    assert len(values["results.time_data"]) == batches
    assert len(values["results.warmup_time_data"]) == warmup
    times = values["results.time_data"]
    assert all(t > 0 for t in times)
    assert values["results.time"] == pytest.approx(sum(times) / batches)
    assert values["results.time_median"] <= values["results.time_p99"] <= max(times) + 1e-9
    assert values["results.throughput"] == pytest.approx(batch * 1000.0 / values["results.time"])
    assert values["results.mem_peak"] > 0
    assert values["results.start_time"] < values["results.end_time"]
    start, end, finished = (datetime.fromisoformat(values[key]) for key in
                            ("results.timed_start", "results.timed_end", "results.end_time"))
    # The end time has milliseconds only (cut, not rounded), the marks microseconds.
    assert start < end < finished + timedelta(milliseconds=1)
    assert values["results.flops_unavailable"].startswith("MXNet has no FLOP counter")
    return values


@pytest.mark.parametrize(("model_id", "title", "phase", "warmup", "extra"), [
    ("deep_mnist", "DeepMNIST", "training", 0, []),
    ("deep_mnist", "DeepMNIST", "inference", 1, []),
    ("sensor_net", "SensorNet", "training", 1, ["--kv_store", "local"]),
    ("acoustic_model", "AcousticModel", "inference", 0, ["--hybridize", "false"]),
    ("resnet18", "ResNet18", "training", 1, []),
    ("resnet18", "ResNet18", "inference", 1, ["--graph_backend", "onednn"]),
    ("googlenet", "GoogleNet", "training", 0, ["--static_graph", "off"]),
])
def test_two_batches(run_backend, model_id, title, phase, warmup, extra):
    flags = ["--model", model_id, "--batch_size", "2", "--num_batches", "2",
             "--num_warmup_batches", str(warmup), "--forward_only",
             "yes" if phase == "inference" else "no", *extra]
    values = assert_ok(run_backend(*flags), batch=2, batches=2, warmup=warmup, title=title)
    assert "results.time_data_wait" not in values  # synthetic data waits for nothing


@pytest.mark.parametrize("kv_store", ["device", "local"])
def test_data_parallel_over_several_contexts(run_backend, kv_store):
    # Two CPU contexts take the multi-GPU path: split batches, aggregation in the kvstore.
    run = run_backend("--model", "sensor_net", "--cpu_contexts", "2", "--kv_store", kv_store,
                      "--batch_size", "3", "--num_batches", "2", "--num_warmup_batches", "1")
    assert_ok(run, batch=6, batches=2, warmup=1, title="SensorNet")


def test_deep_speech2_inference(run_backend):
    run = run_backend("--model", "deep_speech2", "--batch_size", "1", "--num_batches", "1",
                      "--num_warmup_batches", "0", "--forward_only")
    assert_ok(run, batch=1, batches=1, warmup=0, title="DeepSpeech2")


@pytest.mark.parametrize(("flags", "message"), [
    (["--model", "resnet51"], "unknown model 'resnet51'; known models: acoustic_model"),
    (["--model", "resnet18", "--kv_store", "horovod"], "unknown kv_store 'horovod'"),
    (["--model", "resnet18", "--dtype", "float64"], "unknown dtype 'float64'"),
    (["--model", "resnet18", "--kv_store", "dist_sync"], "needs a scheduler and servers"),
    (["--model", "resnet18", "--device", "gpu", "--num_gpus", "2"],
     "--num_gpus 2 but MXNet sees 0 GPU(s) (this MXNet has no CUDA)"),
    (["--model", "deep_mnist", "--data_dir", "/nonexistent/imagenet"],
     "does not take images"),
    (["--model", "resnet18", "--data_dir", "/nonexistent/imagenet"],
     "--data_dir '/nonexistent/imagenet': no such file or directory"),
    (["--model", "resnet18", "--batch_size", "two"], "argument --batch_size: invalid int value"),
    (["--model", "resnet18", "--forward_only", "maybe"],
     "expected a boolean (true/false/yes/no/on/off/1/0/t/f/y/n), got 'maybe'"),
    (["--model", "resnet18", "--preprocess_threads", "-1"], "--preprocess_threads must not be"),
    (["--batch_size", "2"], "the following arguments are required: --model"),
])
def test_bad_input_is_a_clear_failure(run_backend, flags, message):
    run = run_backend(*flags)
    assert run.returncode == 2
    assert run.values["results.status"] == "failure"
    assert message in run.values["results.status_msg"]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchmarks.py: error: ")
    assert message in lines[0]
    assert "results.time" not in run.values


def wait_until_it_catches(pid: int, signum: int, timeout: float = 60) -> None:
    """Return once process `pid` has a handler for `signum` (its SigCgt mask in /proc)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/status") as status:
            caught = next(int(line.split()[1], 16) for line in status
                          if line.startswith("SigCgt:"))
        if caught & (1 << (signum - 1)):
            return
        time.sleep(0.005)
    raise AssertionError(f"process {pid} did not catch signal {signum} in {timeout} s")


@pytest.mark.parametrize("when", ["in the timed batches", "during the start-up"])
def test_sigterm_is_a_failure_with_its_reason(when):
    """SIGTERM at any moment ends the backend with a failure and its reason.

    In the timed batches: sent once the backend has printed its timed start. During the
    start-up: sent as soon as the backend catches SIGTERM (its handler is the first thing it
    installs, before `import mxnet`), so mostly while MXNet loads (on a loaded machine, during
    or after the import: both must end the process; one that came during the import once
    left MXNet's engine half made and the process waiting for it at its exit; one that came
    where Python discards exceptions was once lost and the run went on: the backstop of
    benchmark_common.termination reports it). A fixed delay instead once fell before the
    interpreter had started on a loaded machine: SIGTERM's default action, not the backend's.
    """
    # `with` closes the pipes whatever happens (left open, a failure here became another
    # test's ResourceWarning when the garbage collector found them).
    with subprocess.Popen(
            [sys.executable, str(BENCHMARKS), "--device", "cpu", "--model", "deep_mnist",
             "--batch_size", "2", "--num_batches", "1000000", "--num_warmup_batches", "0"],
            env=backend_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True) as process:
        try:
            seen = []
            if when == "in the timed batches":
                assert process.stdout is not None
                for line in process.stdout:
                    seen.append(line)
                    if line.startswith("__results.timed_start__="):
                        break
            else:
                wait_until_it_catches(process.pid, signal.SIGTERM)
            process.send_signal(signal.SIGTERM)
            stdout, _ = process.communicate(timeout=60)
        finally:
            process.kill()
            process.wait()
    values = parse_protocol("".join(seen) + stdout)
    assert process.returncode == 1
    assert values["results.status"] == "failure"
    assert values["results.status_msg"] == "KeyboardInterrupt: terminated by signal 15"
    assert "results.time" not in values


def test_a_crash_is_a_failure_with_its_reason(monkeypatch, capsys):
    from mxnet_benchmarks import runner

    def explode(opts):
        raise RuntimeError("Traceback (most recent call last):\n  File src/storage.cc\n"
                           "MXNetError: out of memory")

    monkeypatch.setattr(runner, "run", explode)
    # main() turns SIGTERM into an interrupt for its process: this one is the test's worker.
    monkeypatch.setattr(signal, "signal", lambda number, handler: None)
    status = benchmarks.main(["--model", "resnet18", "--device", "cpu"])
    out = capsys.readouterr().out
    assert status == 1
    assert '__results.status__="failure"' in out
    assert '__results.status_msg__="RuntimeError: MXNetError: out of memory"' in out
    assert "__results.time__" not in out
