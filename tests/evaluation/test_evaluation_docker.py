"""The scenarios in containers on the real Docker Engine: inputs mounted, outputs on the host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evaluation_helpers import TORCH_MODELS, logs_by_scenario, make_image_folder

from tests.targets.conftest import docker_client, test_image  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker


def in_container(test_image) -> list[str]:  # noqa: F811
    """Run the host's venv (it has LoadGen and the frameworks) inside the local test image."""
    mounts = " ".join(f"-v {m.host}:{m.container}:ro" for m in test_image["mounts"])
    return ["-P", "exp.docker=true", "-P", f"exp.docker_image={test_image['name']}",
            "-P", f"exp.docker_args=--rm --shm-size=256m --ipc=host {mounts}",
            "-P", f"runtime.python={test_image['venv']}/bin/python", "-P", "runtime.cuda_cache="]


def test_dummy_scenarios_write_their_logs_on_the_host(run_dlbs, tmp_path, test_image):  # noqa: F811
    result = run_dlbs("run", *in_container(test_image), "-P", "exp.framework=dummy",
                      "-P", "dummy.sleep=0.01", "-P", "exp.replica_batch=4",
                      "-P", "exp.min_duration_s=0.3", "-P", "exp.min_query_count=10",
                      "-P", "exp.num_samples=20", "-P", "exp.publish_predictions=true",
                      "-V", 'exp.scenario=["offline", "accuracy"]')
    assert result.returncode == 0, result.stderr
    logs = logs_by_scenario(tmp_path / "logs")
    offline = logs["offline"]
    # The paths the backend printed inside the container are the host's.
    assert Path(offline["results.loadgen_log_dir"], "mlperf_log_summary.txt").is_file()
    assert offline["results.qps"] > 0
    predictions = Path(logs["accuracy"]["results.predictions_file"])
    assert len(predictions.read_text().splitlines()) == 20


@pytest.mark.pytorch
@pytest.mark.slow
def test_pytorch_accuracy_in_a_container_is_the_bare_metal_one(run_dlbs, tmp_path,
                                                               test_image):  # noqa: F811
    import torch

    (tmp_path / "models.py").write_text(TORCH_MODELS)
    namespace: dict = {}
    exec(compile(TORCH_MODELS.replace("@register_model", "# "), "models", "exec"), namespace)
    torch.manual_seed(1)
    torch.save(namespace["tiny_classifier"](4).state_dict(), tmp_path / "weights.pt")
    (tmp_path / "names.txt").write_text("a\nb\nc\nd\n")
    make_image_folder(tmp_path / "images", 4, per_class=6, seed=5)
    # Relative paths, as a user writes them: they mean the same inside the container.
    # (exp.data_dir is mounted at /workspace/data by a docker volume, which needs it whole.)
    spec = ["-P", "exp.framework=pytorch", "-P", "exp.model=tiny_colours",
            "-P", "pytorch.extra_models=models.py", "-P", "exp.weights=weights.pt",
            "-P", "exp.labels=names.txt", "-P", f"exp.data_dir={tmp_path / 'images'}",
            "-P", "pytorch.data_backend=image_folder", "-P", "exp.replica_batch=4",
            "-P", "exp.scenario=accuracy", "-P", "exp.publish_predictions=true"]
    bare = run_dlbs("run", *spec)
    assert bare.returncode == 0, bare.stderr
    contained = run_dlbs("run", *spec, *in_container(test_image), "-P", "exp.log_dir=clogs")
    assert contained.returncode == 0, contained.stderr
    here = logs_by_scenario(tmp_path / "logs")["accuracy"]
    there = logs_by_scenario(tmp_path / "clogs")["accuracy"]
    assert there["results.top1"] == here["results.top1"]
    assert there.get("results.top5") == here.get("results.top5") and \
        there.get("results.top5_unavailable") == here.get("results.top5_unavailable")
    first = json.loads(Path(there["results.predictions_file"]).read_text().splitlines()[0])
    assert first["top"][0]["name"] in "abcd"  # the labels file reached the container
