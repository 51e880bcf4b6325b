"""`dlbs predict`: each image's top classes; a bad image gets one line, the others still print."""

from __future__ import annotations

import json
import struct

import pytest
from evaluation_helpers import (
    PALETTE,
    TORCH_MODELS,
    colour_image,
)


def png_header(width: int = 1, height: int = 1) -> bytes:
    """The start of a PNG file: what the dummy backend reads of an image (29 bytes)."""
    return b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR" + struct.pack(">II", width, height) + \
        b"\x08\x02\x00\x00\x00"


def test_each_image_prints_and_a_bad_one_is_one_line(run_dlbs, tmp_path):
    (tmp_path / "a.png").write_bytes(png_header())
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "notes.jpg").write_bytes(b"abc")
    result = run_dlbs("predict", "--framework", "dummy", "--model", "resnet50", "--top", "3",
                      "a.png", "empty.jpg", "notes.jpg", "missing.jpg")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "a.png" and len(lines) == 4  # the good image and its three classes
    assert lines[1].split() == ["0.5000", "29"]  # the dummy's class is the size, 29 bytes
    assert result.stderr.splitlines() == [
        "dlbs: error: empty.jpg: the file is empty",
        "dlbs: error: notes.jpg: not an image (no PNG, JPEG, GIF, BMP, WebP or TIFF signature)",
        "dlbs: error: missing.jpg: No such file or directory"]


def test_json_holds_every_image(run_dlbs, tmp_path):
    (tmp_path / "a.png").write_bytes(png_header() + b"abcd")
    result = run_dlbs("predict", "--framework", "dummy", "--model", "m", "--format", "json",
                      "a.png")
    assert result.returncode == 0, result.stderr
    (answer,) = json.loads(result.stdout)
    assert answer["image"] == "a.png" and answer["top"][0]["class"] == 33


@pytest.mark.parametrize(("args", "message"), [
    (["--top", "0"], "--top must be at least 1"),
    (["--weights", "nope.pt"], "no such file: nope.pt"),
    (["-P", "exp.docker=true"], "runs the backend on this host"),
])
def test_usage_errors_are_one_line(run_dlbs, tmp_path, args, message):
    (tmp_path / "a.png").write_bytes(png_header())
    result = run_dlbs("predict", "--framework", "dummy", "--model", "m", *args, "a.png")
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


# -- issue 24 item 8 (and item 6: the dummy classifies only images) -----------------------------
def _bomb(path, mode: str = "1", side: int = 20_000) -> None:
    """A small PNG that decodes to `side` x `side` pixels (a decompression bomb)."""
    from PIL import Image

    Image.new(mode, (side, side)).save(path, optimize=True)


@pytest.mark.parametrize("framework", [
    "dummy", pytest.param("pytorch", marks=pytest.mark.pytorch),
    pytest.param("mxnet", marks=pytest.mark.mxnet)])
def test_a_decompression_bomb_among_good_images_is_one_line(run_dlbs, tmp_path, framework):
    import os

    from PIL import Image

    rng = __import__("numpy").random.default_rng(0)
    colour_image(PALETTE[0], rng).save(tmp_path / "red.png")
    colour_image(PALETTE[1], rng).save(tmp_path / "green.jpg")
    _bomb(tmp_path / "bomb.png")  # 400 million pixels: Pillow's error
    _bomb(tmp_path / "big.png", "L", 10_000)  # 100 million: only Pillow's warning
    (tmp_path / "notes.txt").write_text("not an image\n")
    os.mkfifo(tmp_path / "fifo.png")
    assert (tmp_path / "bomb.png").stat().st_size < 100_000
    result = run_dlbs("predict", "--framework", framework, "--model", "resnet18", "--top", "2",
                      "red.png", "bomb.png", "big.png", "notes.txt", "fifo.png", "/dev/zero",
                      "green.jpg", timeout=600)
    assert result.returncode == 1, result.stderr
    printed = [line.removesuffix("  (random weights)")   # no --weights (docs/evaluation.md)
               for line in result.stdout.splitlines() if not line.startswith(" ")]
    assert printed == ["red.png", "green.jpg"]
    errors = [line for line in result.stderr.splitlines() if line.startswith("dlbs: error:")]
    assert [line.split(":")[2].strip() for line in errors] == [
        "bomb.png", "big.png", "notes.txt", "fifo.png", "/dev/zero"], errors
    assert "400000000 pixels" in errors[0] and "decompression bomb" in errors[0]
    assert "100000000 pixels" in errors[1]
    assert all("not a regular file" in line for line in errors[3:])
    assert Image.MAX_IMAGE_PIXELS == 89_478_485  # the bound the dummy shares


# -- issue 34 item 15: a truncated image is that image's line; an empty path is refused -------
TRUNCATED = {
    "png-in-size.png": png_header()[:20],
    "png-signature.png": png_header()[:10],
    "png-no-ihdr.png": png_header()[:8] + b"\x00\x00\x00\x0dIDAT" + b"\x00" * 16,
    "gif.gif": b"GIF89a\x01",
    "bmp.bmp": b"BM\x00\x00",
    "jpeg.jpg": b"\xff\xd8\xff\xe0\x00\x10JFIF",
}


def test_truncated_images_are_one_line_each_and_the_others_print(run_dlbs, tmp_path):
    for name, data in TRUNCATED.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "a.png").write_bytes(png_header())
    (tmp_path / "b.png").write_bytes(png_header(2, 2))
    names = list(TRUNCATED)
    result = run_dlbs("predict", "--framework", "dummy", "--model", "m", "--top", "1",
                      names[0], "a.png", *names[1:], "b.png")
    assert result.returncode == 1, result.stderr
    assert [line for line in result.stdout.splitlines() if not line.startswith(" ")] == [
        "a.png", "b.png"]
    errors = result.stderr.splitlines()
    assert [line.split(": ")[2] for line in errors] == names, errors
    assert "Traceback" not in result.stderr and "struct" not in result.stderr
    assert "a PNG whose first chunk is not IHDR" in errors[2]
    assert all("truncated" in line for index, line in enumerate(errors) if index != 2)


@pytest.mark.parametrize("images", [[""], ["", "a.png"], ["a.png", ""]])
def test_an_empty_image_path_is_a_clear_error(run_dlbs, tmp_path, images):
    (tmp_path / "a.png").write_bytes(png_header())
    result = run_dlbs("predict", "--framework", "dummy", "--model", "m", *images)
    assert result.returncode == 2
    assert result.stderr.startswith('dlbs: error: an image path is empty ("")')
    assert "directory" not in result.stderr and result.stdout == ""


def test_a_folder_named_as_an_image_is_its_own_line(run_dlbs, tmp_path):
    (tmp_path / "a.png").write_bytes(png_header())
    (tmp_path / "photos").mkdir()
    result = run_dlbs("predict", "--framework", "dummy", "--model", "m", "photos", "a.png")
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == "a.png"
    assert result.stderr.splitlines() == ["dlbs: error: photos: Is a directory"]
