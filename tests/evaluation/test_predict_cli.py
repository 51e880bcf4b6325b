"""`dlbs predict`: each image's top classes; a bad image gets one line, the others still print."""

from __future__ import annotations

import json

import pytest
from evaluation_helpers import (
    PALETTE,
    TORCH_MODELS,
    colour_image,
)


def test_each_image_prints_and_a_bad_one_is_one_line(run_dlbs, tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"abc")
    (tmp_path / "empty.jpg").write_bytes(b"")
    result = run_dlbs("predict", "--framework", "dummy", "--model", "resnet50", "--top", "3",
                      "a.jpg", "empty.jpg", "missing.jpg")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "a.jpg" and len(lines) == 4  # the good image and its three classes
    assert lines[1].split() == ["0.5000", "3"]  # the dummy's class is the size, 3 bytes
    assert result.stderr.splitlines() == ["dlbs: error: empty.jpg: the file is empty",
                                          "dlbs: error: missing.jpg: No such file or directory"]


def test_json_holds_every_image(run_dlbs, tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"abcd")
    result = run_dlbs("predict", "--framework", "dummy", "--model", "m", "--format", "json",
                      "a.jpg")
    assert result.returncode == 0, result.stderr
    (answer,) = json.loads(result.stdout)
    assert answer["image"] == "a.jpg" and answer["top"][0]["class"] == 4


@pytest.mark.parametrize(("args", "message"), [
    (["--top", "0"], "--top must be at least 1"),
    (["--weights", "nope.pt"], "no such file: nope.pt"),
    (["-P", "exp.docker=true"], "runs the backend on this host"),
])
def test_usage_errors_are_one_line(run_dlbs, tmp_path, args, message):
    (tmp_path / "a.jpg").write_bytes(b"abc")
    result = run_dlbs("predict", "--framework", "dummy", "--model", "m", *args, "a.jpg")
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.pytorch
@pytest.mark.slow
def test_pytorch_predicts_what_the_model_says(run_dlbs, tmp_path):
    import numpy as np
    import torch

    (tmp_path / "models.py").write_text(TORCH_MODELS)
    namespace: dict = {}
    exec(compile(TORCH_MODELS.replace("@register_model", "# "), "models", "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["tiny_classifier"](4)
    torch.save(model.state_dict(), tmp_path / "w.pt")
    (tmp_path / "labels.txt").write_text("red\ngreen\nblue\nyellow\n")
    rng = np.random.default_rng(0)
    colour_image(PALETTE[0], rng).save(tmp_path / "red.png")
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    result = run_dlbs("predict", "--model", "tiny_colours", "--weights", "w.pt",
                      "--labels", "labels.txt", "--format", "json", "-P",
                      f"pytorch.extra_models={tmp_path / 'models.py'}", "red.png", "broken.png")
    assert result.returncode == 1, result.stderr
    red, broken = json.loads(result.stdout)
    assert "not an image" in broken["error"]
    # The same numbers from the model itself.
    from benchmark_common.preprocess import preprocess
    from PIL import Image

    with torch.inference_mode():
        logits = model.eval()(torch.from_numpy(preprocess(Image.open(tmp_path / "red.png"),
                                                          32)[None]))
    probabilities = torch.softmax(logits, 1)[0]
    best = int(probabilities.argmax())
    assert red["top"][0]["class"] == best
    assert red["top"][0]["name"] == ["red", "green", "blue", "yellow"][best]
    assert red["top"][0]["probability"] == pytest.approx(float(probabilities[best]), rel=1e-5)
    assert len(red["top"]) == 4  # --top 5 of a 4-class model
