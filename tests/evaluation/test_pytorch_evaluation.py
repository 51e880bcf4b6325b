"""PyTorch: `dlbs run` reports the top-1 a plain loop computes, over every dataset format.

The test trains a tiny colour classifier on images it generates, saves its state dict, and
evaluates it on a folder where every fourth image shows the next class's colour: the model's
top-1 is then well below 1, and must be exactly the plain loop's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from evaluation_helpers import (
    FOUR_CLASSES_TOP5,
    PYTHON_DIR,
    TORCH_MODELS,
    logs_by_scenario,
    make_image_folder,
    reported_accuracy,
    run_backend,
    top_k_fractions,
    training_batch,
)

pytestmark = [pytest.mark.pytorch, pytest.mark.slow]
CLASSES = 4


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(models file, weights file, evaluation folder, plain loop's (top1, top5))."""
    import torch
    from torchvision import transforms
    from torchvision.datasets import ImageFolder

    root = tmp_path_factory.mktemp("pytorch_eval")
    models = root / "models.py"
    models.write_text(TORCH_MODELS)
    namespace: dict = {}
    sys.path.insert(0, str(PYTHON_DIR))
    exec(compile(TORCH_MODELS.replace("@register_model", "# "), "models", "exec"), namespace)
    model = namespace["tiny_classifier"](CLASSES)
    torch.manual_seed(0)
    images, labels = training_batch(CLASSES, 128, seed=1)
    inputs, targets = torch.from_numpy(images), torch.from_numpy(labels)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(80):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
    weights = root / "tiny.pt"
    torch.save(model.state_dict(), weights)
    folder = make_image_folder(root / "eval", CLASSES, per_class=12, seed=2, mislabeled_every=4)
    # The plain loop: torchvision's own dataset and transforms, the model, argmax.
    transform = transforms.Compose([
        transforms.Resize(int(round(32 * 256 / 224))), transforms.CenterCrop(32),
        transforms.ToTensor(), transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    dataset = ImageFolder(str(folder), transform=transform)
    model.eval()
    with torch.inference_mode():
        scores = torch.cat([model(torch.stack([dataset[i][0] for i in range(j, j + 7)
                                               if i < len(dataset)]))
                            for j in range(0, len(dataset), 7)])
    expected = top_k_fractions(scores.numpy(), [label for _, label in dataset.samples])
    assert 0.6 <= expected[0] <= 0.8  # trained on the colours; the mislabelled quarter is wrong
    return models, weights, folder, expected


def accuracy_params(models: Path, weights: Path, data: Path, backend: str = "image_folder"):
    return ["-P", "exp.framework=pytorch", "-P", "exp.model=tiny_colours",
            "-P", f"pytorch.extra_models={models}", "-P", f"exp.weights={weights}",
            "-P", f"exp.data_dir={data}", "-P", f"pytorch.data_backend={backend}",
            "-P", "exp.replica_batch=5", "-P", "pytorch.num_loader_threads=0",
            "-P", "exp.scenario=accuracy"]


def test_accuracy_is_the_plain_loops_on_a_folder_and_an_lmdb(run_dlbs, tmp_path, trained):
    models, weights, folder, (top1, top5) = trained
    lmdb = tmp_path / "eval_lmdb"
    subprocess.run([sys.executable, str(PYTHON_DIR / "pytorch_benchmarks" /
                                        "build_caffe_lmdb.py"), "--image_folder", str(folder),
                    "--output", str(lmdb)], check=True, capture_output=True, timeout=120)
    result = run_dlbs("run", *accuracy_params(models, weights, folder), "-P",
                      "exp.publish_predictions=true")
    assert result.returncode == 0, result.stderr
    values = logs_by_scenario(tmp_path / "logs")["accuracy"]
    assert reported_accuracy(values) == (top1, FOUR_CLASSES_TOP5) and top5 == 1.0
    assert values["results.num_samples"] == 48  # every image, the last batch of 5 is short
    lines = Path(values["results.predictions_file"]).read_text().splitlines()
    assert len(lines) == 48
    lmdb_run = run_backend("pytorch", "--model", "tiny_colours", "--extra_models", str(models),
                           "--weights", str(weights), "--data_dir", str(lmdb),
                           "--data_backend", "caffe_lmdb", "--device", "cpu",
                           "--forward_only", "--batch_size", "7", "--scenario", "accuracy",
                           "--loadgen_dir", str(tmp_path / "lmdb.loadgen"))
    assert lmdb_run.returncode == 0, lmdb_run.stderr
    assert reported_accuracy(lmdb_run.values) == (top1, FOUR_CLASSES_TOP5)


def test_random_weights_score_one_in_k(tmp_path, trained):
    models = trained[0]
    noise = make_image_folder(tmp_path / "noise", 10, per_class=20, seed=3, noise_only=True)
    run = run_backend("pytorch", "--model", "tiny_ten", "--extra_models", str(models),
                      "--data_dir", str(noise), "--data_backend", "image_folder",
                      "--device", "cpu", "--forward_only", "--batch_size", "16",
                      "--scenario", "accuracy", "--loadgen_dir", str(tmp_path / "lg"))
    assert run.returncode == 0, run.stderr
    # 200 images whose classes have nothing to do with their pixels: top-k is k/10, within
    # four standard deviations of the binomial (0.021 for top-1, 0.035 for top-5).
    assert run.values["results.top1"] == pytest.approx(0.1, abs=0.085)
    assert run.values["results.top5"] == pytest.approx(0.5, abs=0.14)


def test_performance_scenarios_with_trained_weights(run_dlbs, tmp_path, trained):
    models, weights, folder, _ = trained
    result = run_dlbs("run", "-P", "exp.framework=pytorch", "-P", "exp.model=tiny_colours",
                      "-P", f"pytorch.extra_models={models}", "-P", f"exp.weights={weights}",
                      "-P", f"exp.data_dir={folder}", "-P", "pytorch.data_backend=image_folder",
                      "-P", "exp.replica_batch=4", "-P", "exp.min_duration_s=0.5",
                      "-P", "exp.min_query_count=20", "-P", "exp.target_qps=20",
                      "-P", "exp.latency_bound_ms=1000",
                      "-V", 'exp.scenario=["single_stream", "offline", "server"]')
    assert result.returncode == 0, result.stderr
    logs = logs_by_scenario(tmp_path / "logs")
    for name in ("single_stream", "offline", "server"):
        values = logs[name]
        assert values["results.status"] == "ok"
        assert 0 < values["results.latency_p50"] <= values["results.latency_p99"]
        assert values["results.qps"] > 0 and values["exp.model_title"] == "TinyColours"
    assert logs["server"]["results.latency_bound_met"] is True


@pytest.mark.parametrize(("weights", "message"), [
    ("missing.pt", "--weights missing.pt: no such file"),
    ("garbage.pt", "not a PyTorch state dict"),
    ("other.pt", "do not fit model tiny_colours"),
])
def test_weights_that_cannot_be_used_are_one_line(tmp_path, trained, weights, message,
                                                  monkeypatch):
    import torch

    monkeypatch.chdir(tmp_path)
    (tmp_path / "garbage.pt").write_bytes(b"not a pickle")
    torch.save({"conv.weight": torch.zeros(1)}, tmp_path / "other.pt")
    run = run_backend("pytorch", "--model", "tiny_colours", "--extra_models", str(trained[0]),
                      "--weights", str(tmp_path / weights) if weights != "missing.pt"
                      else weights, "--device", "cpu", "--forward_only", "--scenario",
                      "offline", "--loadgen_dir", str(tmp_path / "lg"))
    assert run.returncode == 2, run.stderr
    assert message in run.stderr and "Traceback" not in run.stderr
    assert run.values["results.status"] == "failure"
