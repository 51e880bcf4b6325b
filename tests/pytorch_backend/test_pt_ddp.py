"""DistributedDataParallel with two CPU processes (gloo) under torchrun."""

from __future__ import annotations

import pytest
from pytorch_backend_helpers import RANK_FAILURE_MODEL

pytestmark = pytest.mark.pytorch

TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def test_two_process_training_reports_once_for_the_job(backend):
    run = backend(
        "--model",
        "sensor_net",
        "--device",
        "cpu",
        "--batch_size",
        "4",
        "--num_batches",
        "3",
        "--num_warmup_batches",
        "1",
        "--num_threads",
        "1",
        launcher=TORCHRUN,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    values = run.values
    assert values["results.status"] == "ok"
    # Only rank 0 prints results, and its throughput counts both replicas.
    assert run.counts["results.throughput"] == 1
    assert values["results.throughput"] == pytest.approx(4 * 2 * 1000.0 / values["results.time"])
    assert run.stdout.count("batch=4x2") == 2  # each rank logs its setup


def test_two_process_training_on_sharded_real_data(backend, extra_models, image_folder):
    run = backend(
        "--model",
        "tiny_cnn",
        "--extra_models",
        str(extra_models),
        "--device",
        "cpu",
        "--batch_size",
        "2",
        "--num_batches",
        "4",
        "--num_warmup_batches",
        "0",
        "--data_dir",
        str(image_folder),
        "--data_backend",
        "image_folder",
        "--num_loader_threads",
        "0",
        "--data_shuffle",
        "--ddp_comm_hook",
        "bf16",
        launcher=TORCHRUN,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.values["results.status"] == "ok"
    assert run.counts["results.time_data_wait"] == 1
    assert len(run.values["results.time_data"]) == 4


def test_a_failing_rank_fails_the_job_with_its_reason(backend, tmp_path):
    models = tmp_path / "rank_models.py"
    models.write_text(RANK_FAILURE_MODEL)
    run = backend(
        "--model",
        "breaks_on_rank_one",
        "--extra_models",
        str(models),
        "--device",
        "cpu",
        "--batch_size",
        "2",
        "--num_batches",
        "3",
        "--num_warmup_batches",
        "1",
        launcher=TORCHRUN,
        timeout=240,
    )
    assert run.returncode != 0
    assert run.values["results.status"] == "failure"
    assert run.values["results.status_msg"] == "rank 1: RuntimeError: rank 1 broke on purpose"
    assert "results.throughput" not in run.values
