"""Two-batch runs on the CPU: training and inference, the log protocol, failures."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import time

import pytest
from pytorch_backend_helpers import BACKEND, backend_env, parse_keys

pytestmark = pytest.mark.pytorch

TIME_KEYS = [
    "results.time",
    "results.time_std",
    "results.time_median",
    "results.time_p90",
    "results.time_p95",
    "results.time_p99",
]


def check_ok_protocol(run, batch: int, batches: int, warmup: int, replicas: int = 1) -> None:
    """Every key of docs/backends/protocol.md section 4, consistent with each other."""
    assert run.returncode == 0, run.stderr[-3000:]
    v = run.values
    assert v["results.status"] == "ok"
    for key in TIME_KEYS:
        assert isinstance(v[key], float) and v[key] > 0, key
    assert len(v["results.time_data"]) == batches
    assert len(v["results.warmup_time_data"]) == warmup
    mean = sum(v["results.time_data"]) / batches
    assert v["results.time"] == pytest.approx(mean)
    assert v["results.time_p90"] <= v["results.time_p99"] <= max(v["results.time_data"]) + 1e-9
    assert v["results.throughput"] == pytest.approx(batch * replicas * 1000.0 / v["results.time"])
    assert v["results.mem_peak"] > 0
    assert v["exp.model_title"]
    assert v["exp.framework_ver"].startswith("2.")
    start = dt.datetime.fromisoformat(v["results.start_time"])
    end = dt.datetime.fromisoformat(v["results.end_time"])
    assert start <= end
    for key, count in run.counts.items():
        assert count == 1, f"{key} printed {count} times"


@pytest.mark.parametrize(
    ("model", "phase", "dtype"),
    [
        ("sensor_net", "training", "float32"),
        ("sensor_net", "inference", "float32"),
        ("deep_mnist", "training", "bfloat16"),
        ("deep_mnist", "inference", "bfloat16"),
        ("acoustic_model", "inference", "float"),
    ],
)
def test_small_model_two_batches(backend, model, phase, dtype):
    run = backend(
        "--model",
        model,
        "--device",
        "cpu",
        "--batch_size",
        "4",
        "--num_batches",
        "2",
        "--num_warmup_batches",
        "1",
        "--dtype",
        dtype,
        "--forward_only",
        "true" if phase == "inference" else "false",
        "--num_threads",
        "1",
    )
    check_ok_protocol(run, batch=4, batches=2, warmup=1)
    assert "results.time_data_wait" not in run.values  # synthetic data: nothing to wait for
    assert f"phase={phase}" in run.stdout


def test_zero_warmup_batches_and_channels_last_image_model(backend, extra_models):
    run = backend(
        "--model",
        "tiny_cnn",
        "--extra_models",
        str(extra_models),
        "--device",
        "cpu",
        "--batch_size",
        "3",
        "--num_batches",
        "2",
        "--num_warmup_batches",
        "0",
        "--channels_last",
        "--synthetic_data_location",
        "pinned_host",
    )
    check_ok_protocol(run, batch=3, batches=2, warmup=0)
    assert run.values["exp.model_title"] == "TinyCNN"


def test_resnet18_trains_two_batches(backend):
    run = backend(
        "--model",
        "resnet18",
        "--device",
        "cpu",
        "--batch_size",
        "2",
        "--num_batches",
        "2",
        "--num_warmup_batches",
        "0",
        "--num_threads",
        "2",
    )
    check_ok_protocol(run, batch=2, batches=2, warmup=0)
    assert run.values["exp.model_title"] == "ResNet18"


def test_out_of_memory_is_a_failure_with_reason(backend, extra_models):
    run = backend(
        "--model",
        "oom_model",
        "--extra_models",
        str(extra_models),
        "--device",
        "cpu",
        "--batch_size",
        "2",
        "--num_batches",
        "2",
    )
    assert run.returncode != 0
    assert run.values["results.status"] == "failure"
    assert run.values["results.status_msg"].startswith("out of memory:")
    assert "results.throughput" not in run.values and "results.time" not in run.values


def test_sigterm_is_reported_as_failure(extra_models):
    proc = subprocess.Popen(
        [
            sys.executable,
            str(BACKEND),
            "--model",
            "sleep_50ms",
            "--extra_models",
            str(extra_models),
            "--device",
            "cpu",
            "--batch_size",
            "2",
            "--num_batches",
            "10000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=backend_env(),
    )
    deadline = time.time() + 60
    line = ""
    while "[pytorch_benchmarks] model=" not in line and time.time() < deadline:
        line = proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=60)
    values, _ = parse_keys(stdout)
    assert proc.returncode != 0
    assert values["results.status"] == "failure"
    assert "terminated by signal" in values["results.status_msg"]
    assert "results.throughput" not in values
