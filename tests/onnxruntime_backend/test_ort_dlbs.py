"""`dlbs run` of the ONNX Runtime backend: bare metal, in a container, as a SLURM job.

The same recipe (launchers/onnxruntime.py) serves all three; the model cache lives on the
host (`onnxruntime.cache_dir`, by default under the log folder) and is mounted into
containers, so an export made in one run is reused by the next, wherever it runs.
"""

from __future__ import annotations

import json

import pytest
from ort_helpers import write_linear_model

from dlbs.results.protocol import parse_log
from tests.run.conftest import attempts

pytestmark = pytest.mark.onnxruntime

SMALL = ["-P", "exp.framework=onnxruntime", "-P", "exp.phase=inference",
         "-P", "exp.model=sensor_net", "-P", "exp.replica_batch=2", "-P", "exp.num_batches=3",
         "-P", "exp.num_warmup_batches=1", "-P", "onnxruntime.intra_op_threads=1"]


def logs_of(tmp_path) -> list[dict]:
    return [parse_log(log).values for log in sorted((tmp_path / "logs").glob("*.log"))]


@pytest.mark.pytorch
def test_a_sweep_over_optimisation_levels_reports_one_row_per_level(run_dlbs, tmp_path):
    result = run_dlbs("run", *SMALL, "-V", 'onnxruntime.graph_optimization_level='
                                           '["disabled", "basic", "all"]', timeout=600)
    assert result.returncode == 0, result.stderr
    assert [row[2] for row in attempts(tmp_path / "logs" / "results.db")] == ["ok"] * 3
    # One export, reused by the two later experiments.
    assert [p.name for p in (tmp_path / "logs" / "onnx_cache").iterdir()] == [
        "sensor_net-float32-b2-seed0.onnx"]
    report = run_dlbs("report", "logs", "--format", "json")
    assert report.returncode == 0, report.stderr
    rows = json.loads(report.stdout)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    levels = sorted(str(row.get("onnxruntime.graph_optimization_level")) for row in rows)
    assert levels == ["all", "basic", "disabled"]


def test_dry_run_mounts_the_cache_and_the_model_file_into_a_container(run_dlbs, tmp_path):
    model = write_linear_model(tmp_path / "my model.onnx")
    result = run_dlbs("run", *SMALL, "--dry-run", "--format", "json",
                      "-P", "exp.docker=true", "-P", "exp.docker_image=img:1",
                      "-P", f"onnxruntime.model_file={model}")
    assert result.returncode == 0, result.stderr
    (request,) = [json.loads(line) for line in result.stdout.splitlines()]
    kwargs = request["kwargs"]
    assert f"{tmp_path}/logs/onnx_cache:/workspace/onnx_cache" in kwargs["volumes"]
    assert {"Target": "/workspace/onnx_model/my model.onnx", "Source": str(model),
            "Type": "bind", "ReadOnly": True} in kwargs["mounts"]
    command = request["command"]
    assert command[command.index("--model_file") + 1] == "/workspace/onnx_model/my model.onnx"
    assert command[command.index("--cache_dir") + 1] == "/workspace/onnx_cache"
    assert "/workspace/onnxruntime_benchmarks/benchmarks.py" in command


def container_spec(test_image) -> list[str]:
    """Run the host's venv inside the local test image (no registry can be reached)."""
    mounts = " ".join(f"-v {m.host}:{m.container}:ro" for m in test_image["mounts"])
    return ["-P", "exp.docker=true", "-P", f"exp.docker_image={test_image['name']}",
            "-P", f"exp.docker_args=--rm --shm-size=256m --ipc=host {mounts}",
            "-P", f"runtime.python={test_image['venv']}/bin/python", "-P", "runtime.cuda_cache="]


@pytest.mark.docker
@pytest.mark.pytorch
def test_onnxruntime_exports_and_runs_in_a_container(run_dlbs, tmp_path, test_image,
                                                     docker_client):
    result = run_dlbs("run", *SMALL, *container_spec(test_image), timeout=600)
    assert result.returncode == 0, result.stderr
    (values,) = logs_of(tmp_path)
    assert values["results.status"] == "ok" and values["results.throughput"] > 0
    # The export was written inside the container into the host's cache folder.
    assert (tmp_path / "logs" / "onnx_cache" / "sensor_net-float32-b2-seed0.onnx").is_file()
    assert "--cache_dir /workspace/onnx_cache" in values["onnxruntime.args"]


@pytest.mark.docker
def test_a_users_model_file_runs_in_a_container(run_dlbs, tmp_path, test_image, docker_client):
    model = write_linear_model(tmp_path / "linear.onnx")
    result = run_dlbs("run", *SMALL, *container_spec(test_image),
                      "-P", "exp.model=linear", "-P", f"onnxruntime.model_file={model}")
    assert result.returncode == 0, result.stderr
    (values,) = logs_of(tmp_path)
    assert values["results.status"] == "ok" and values["exp.model_title"] == "linear"


@pytest.mark.slurm
@pytest.mark.pytorch
def test_onnxruntime_runs_as_a_slurm_job(run_dlbs, tmp_path, slurm_cluster):
    result = run_dlbs("run", *SMALL, "-P", "exp.scheduler=slurm",
                      "-V", 'onnxruntime.graph_optimization_level=["basic", "all"]', timeout=600)
    assert result.returncode == 0, result.stderr
    assert [values["results.status"] for values in logs_of(tmp_path)] == ["ok", "ok"]
    assert list((tmp_path / "logs").glob("*.sbatch"))
