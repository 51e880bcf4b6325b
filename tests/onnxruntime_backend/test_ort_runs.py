"""The ONNX Runtime backend on the CPU: exports, the cache, user model files, failures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ort_helpers import BACKEND, CPU, ROOT, run_backend, write_linear_model

pytestmark = pytest.mark.onnxruntime

# The keys of docs/backends/protocol.md section 4 that a successful CPU run prints.
SUCCESS_KEYS = {"exp.model_title", "exp.framework_ver", "results.start_time",
                "results.end_time", "results.time", "results.time_std", "results.time_median",
                "results.time_p90", "results.time_p95", "results.time_p99", "results.time_data",
                "results.warmup_time_data", "results.throughput", "results.mem_peak",
                "results.status"}


def sensor_net(cache: Path, *extra: str):
    return run_backend("--model", "sensor_net", *CPU, "--batch_size", "2",
                       "--cache_dir", str(cache), *extra)


@pytest.mark.pytorch
def test_a_pytorch_model_is_exported_once_then_reused(tmp_path):
    first = sensor_net(tmp_path)
    assert first.returncode == 0, first.stderr
    assert set(first.values) >= SUCCESS_KEYS
    assert first.values["results.status"] == "ok"
    assert first.values["exp.model_title"] == "SensorNet"
    assert len(first.values["results.time_data"]) == 3
    assert len(first.values["results.warmup_time_data"]) == 1
    assert first.values["results.throughput"] == pytest.approx(
        2 * 1000 / first.values["results.time"])
    assert "(exported)" in first.stdout
    # The exporter counted the PyTorch definition's FLOPs and wrote them into the file.
    sys.path.insert(0, str(ROOT / "python"))
    from pytorch_benchmarks.flops import count_flops_per_sample
    from pytorch_benchmarks.models import get_model_spec

    spec = get_model_spec("sensor_net")
    forward, _ = count_flops_per_sample(spec.build, spec.input_shape, training=False)
    assert first.values["results.flops_per_sample"] == forward
    assert first.values["results.timed_start"] < first.values["results.timed_end"]  # same format
    # One file per model, dtype, batch and weights; nothing else left in the cache.
    assert [p.name for p in tmp_path.iterdir()] == ["sensor_net-float32-b2-seed0.onnx"]
    second = sensor_net(tmp_path, "--graph_optimization_level", "disabled")
    assert second.returncode == 0, second.stderr
    assert "(cache)" in second.stdout and "] exported " not in second.stdout
    other_seed = sensor_net(tmp_path, "--seed", "1")
    assert other_seed.returncode == 0, other_seed.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "sensor_net-float32-b2-seed0.onnx", "sensor_net-float32-b2-seed1.onnx"]


@pytest.mark.pytorch
@pytest.mark.slow
def test_two_runs_exporting_the_same_model_at_once_both_see_a_whole_file(tmp_path):
    argv = [sys.executable, str(BACKEND), "--model", "sensor_net", *CPU, "--batch_size", "3",
            "--cache_dir", str(tmp_path)]
    runs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=ROOT) for _ in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert all('__results.status__="ok"' in out for out, _ in outputs)
    # Each wrote a temporary file and renamed it into place: no temporary file remains.
    assert [p.name for p in tmp_path.iterdir()] == ["sensor_net-float32-b3-seed0.onnx"]


@pytest.mark.pytorch
def test_float16_exports_a_float16_model(tmp_path):
    run = sensor_net(tmp_path, "--dtype", "float16")
    assert run.returncode == 0, run.stderr
    assert "=[2, 784]:float16 " in run.stdout
    assert (tmp_path / "sensor_net-float16-b2-seed0.onnx").is_file()


@pytest.mark.pytorch
def test_an_unknown_model_is_refused_with_the_list_of_ids(tmp_path):
    run = run_backend("--model", "resnet5", *CPU, "--cache_dir", str(tmp_path))
    assert run.returncode == 2
    assert "unknown model 'resnet5'" in run.values["results.status_msg"]
    assert "resnet50" in run.values["results.status_msg"]
    assert "Traceback" not in run.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_wrong_pytorch_backend_folder_is_named(tmp_path):
    run = run_backend("--model", "resnet50", *CPU, "--cache_dir", str(tmp_path),
                      "--pytorch_backend", str(tmp_path))
    assert run.returncode == 2
    assert "is not the PyTorch backend's folder" in run.values["results.status_msg"]


def test_a_missing_execution_provider_is_refused_naming_those_there_are(tmp_path):
    model = write_linear_model(tmp_path / "linear.onnx")
    run = run_backend("--model", "linear", "--forward_only", "--device", "gpu",
                      "--num_gpus", "1", "--execution_provider", "cuda",
                      "--model_file", str(model))
    assert run.returncode == 2
    message = run.values["results.status_msg"]
    assert "has no CUDAExecutionProvider" in message and "CPUExecutionProvider" in message
    assert "Traceback" not in run.stderr


@pytest.fixture
def no_torch(tmp_path) -> dict[str, str]:
    """An environment in which `import torch` fails."""
    blocker = tmp_path / "blocked" / "torch"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('torch is blocked in this test')\n")
    return {"PYTHONPATH": str(blocker.parent)}


def test_a_users_model_file_runs_without_torch(tmp_path, no_torch):
    model = write_linear_model(tmp_path / "linear.onnx")
    run = run_backend("--model", "my_linear", *CPU, "--batch_size", "5",
                      "--model_file", str(model), "--cache_dir", str(tmp_path / "cache"),
                      env=no_torch)
    assert run.returncode == 0, run.stderr
    assert set(run.values) >= SUCCESS_KEYS
    assert run.values["exp.model_title"] == "my_linear"
    assert "x=[5, 4]:float32" in run.stdout and "(file)" in run.stdout
    assert not (tmp_path / "cache").exists()
    # Not one of the PyTorch backend's models: its FLOPs are unknown, and it says so.
    assert "results.flops_per_sample" not in run.values
    assert "has no dlbs.flops_per_sample" in run.values["results.flops_unavailable"]


def test_exporting_without_torch_says_what_to_install(tmp_path, no_torch):
    run = run_backend("--model", "resnet50", *CPU, "--cache_dir", str(tmp_path), env=no_torch)
    assert run.returncode == 2
    assert "needs torch, onnx and onnxscript" in run.values["results.status_msg"]
    assert "--model_file" in run.values["results.status_msg"]


@pytest.mark.parametrize("make, args, message", [
    (lambda p: write_linear_model(p, batch=2), ["--batch_size", "3"], "has a fixed batch of 2"),
    (lambda p: write_linear_model(p, dtype="float16"), [], "but --dtype is float32"),
    (lambda p: p.write_bytes(b"not a model") and p, [], "ONNX Runtime cannot run"),
])
def test_a_model_file_that_does_not_fit_is_refused(tmp_path, make, args, message):
    model = tmp_path / "m.onnx"
    make(model)
    run = run_backend("--model", "m", *CPU, "--model_file", str(model), *args)
    assert run.returncode == 2, run.stderr
    assert message in run.values["results.status_msg"]
    assert "Traceback" not in run.stderr


def test_a_missing_model_file_is_refused(tmp_path):
    run = run_backend("--model", "m", *CPU, "--model_file", str(tmp_path / "no.onnx"))
    assert run.returncode == 2
    assert "no such file" in run.values["results.status_msg"]


def test_a_cache_file_that_holds_another_model_is_not_used(tmp_path):
    # A file at the cache's name that is not the export it is named after (here a user's
    # model copied there): the run stops instead of timing the wrong model.
    write_linear_model(tmp_path / "sensor_net-float32-b2-seed0.onnx", batch=2, features=784)
    run = sensor_net(tmp_path)
    assert run.returncode == 2
    assert "is not the export it is named after" in run.values["results.status_msg"]


def test_sigterm_while_timing_is_reported_as_a_failure(tmp_path):
    model = write_linear_model(tmp_path / "linear.onnx")
    argv = [sys.executable, str(BACKEND), "--model", "linear", "--forward_only", "--device",
            "cpu", "--num_batches", "100000000", "--model_file", str(model)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=ROOT)
    lines = []
    for line in process.stdout:  # the setup line is printed just before the timed loop
        lines.append(line)
        if "graph_optimization_level=" in line:
            break
    process.terminate()
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 1
    assert '__results.status__="failure"' in out
    assert "terminated by signal 15" in out and "results.time" not in "".join(lines) + out
