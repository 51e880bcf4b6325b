"""`dlbs run` in containers on the real Docker Engine (started by .ci/run)."""

from __future__ import annotations

import pytest

from dlbs.results.protocol import parse_log
from tests.run.conftest import attempts

pytestmark = pytest.mark.docker


def container_spec(test_image) -> list[str]:
    """Run the host's venv inside the local test image (no registry can be reached)."""
    mounts = " ".join(f"-v {m.host}:{m.container}:ro" for m in test_image["mounts"])
    return ["-P", "exp.docker=true", "-P", f"exp.docker_image={test_image['name']}",
            "-P", f"exp.docker_args=--rm --shm-size=256m --ipc=host {mounts}",
            "-P", f"runtime.python={test_image['venv']}/bin/python"]


@pytest.mark.pytorch
def test_pytorch_benchmark_runs_in_a_container(run_dlbs, tmp_path, test_image, docker_client):
    result = run_dlbs("run", *container_spec(test_image), "-P", "exp.model=deep_mnist",
                      "-P", "exp.replica_batch=8", "-P", "exp.num_batches=3",
                      "-P", "exp.num_warmup_batches=1", "-P", "runtime.cuda_cache=",
                      timeout=300)
    assert result.returncode == 0, result.stderr
    (row,) = attempts(tmp_path / "logs" / "results.db")
    assert row[2] == "ok"
    (log,) = (tmp_path / "logs").glob("*.log")
    values = parse_log(log).values
    assert values["exp.model_title"] and values["results.throughput"] > 0
    # The backend ran from the mount, not from the host path.
    assert values["pytorch.args"][0] == "--model deep_mnist"
    leftovers = docker_client.containers.list(all=True,
                                              filters={"label": f"dlbs.exp_id={row[0]}"})
    assert leftovers == []


def test_dummy_in_a_container_with_data_and_spaces(run_dlbs, tmp_path, test_image):
    data = tmp_path / "my data"
    data.mkdir()
    result = run_dlbs("run", *container_spec(test_image), "-P", "exp.framework=dummy",
                      "-P", "dummy.sleep=0", "-P", "exp.num_batches=2",
                      "-P", f"exp.data_dir={data}", "-P", f"runtime.cuda_cache={tmp_path}/cache")
    assert result.returncode == 0, result.stderr
    (log,) = (tmp_path / "logs").glob("*.log")
    assert "data_dir='/workspace/data'" in log.read_text()
    assert (tmp_path / "cache").is_dir()  # the CUDA cache folder was mounted


def test_missing_image_is_found_before_anything_runs(run_dlbs, tmp_path, test_image):
    spec = container_spec(test_image)
    spec[spec.index(f"exp.docker_image={test_image['name']}")] = \
        "exp.docker_image=dlbs-no-such-image:1"
    result = run_dlbs("run", *spec, "-P", "exp.framework=dummy")
    assert result.returncode == 2
    assert "dlbs-no-such-image:1" in result.stderr and "Traceback" not in result.stderr
    assert not list(tmp_path.glob("logs/*.log"))


def test_gpu_request_fails_naming_the_nvidia_runtime(run_dlbs, tmp_path, test_image):
    result = run_dlbs("run", *container_spec(test_image), "-P", "exp.framework=dummy",
                      "-P", "exp.gpus=0")
    assert result.returncode in (1, 2)
    assert "NVIDIA" in result.stderr or "nvidia" in result.stderr
    assert "Traceback" not in result.stderr
