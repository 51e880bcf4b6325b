"""One preprocessing and one sample order for every format and both backends."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from benchmark_common.datasets import (
    DatasetError,
    detect_format,
    open_dataset,
    preprocessed,
)
from benchmark_common.preprocess import preprocess, resized_shorter_side
from evaluation_helpers import PYTHON_DIR, make_image_folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_image_folder(tmp_path_factory.mktemp("data") / "images", classes=3,
                             per_class=5, mislabeled_every=4)


def test_the_shorter_side_before_the_crop():
    assert resized_shorter_side(224) == 256
    assert resized_shorter_side(299) == 342
    assert resized_shorter_side(32) == 37


@pytest.mark.pytorch
@pytest.mark.parametrize("shape", [(40, 36), (36, 40), (37, 37), (300, 17), (16, 200),
                                   (37, 50)])
@pytest.mark.parametrize("mode", ["RGB", "L", "P", "RGBA"])
def test_preprocessing_is_torchvisions_eval_transform_exactly(shape, mode):
    from PIL import Image
    from torchvision import transforms

    rng = np.random.default_rng(sum(shape))
    image = Image.fromarray(rng.integers(0, 256, (shape[1], shape[0], 3), dtype=np.uint8))
    image = image.convert(mode)
    size = 32
    reference = transforms.Compose([
        transforms.Resize(int(round(size * 256 / 224))), transforms.CenterCrop(size),
        transforms.ToTensor(),
        transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    expected = reference(image.convert("RGB")).numpy()
    got = preprocess(image, size)
    assert got.dtype == np.float32 and got.shape == (3, size, size)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.pytorch
def test_image_folder_order_and_labels_are_torchvisions(folder):
    from torchvision.datasets import ImageFolder

    dataset = open_dataset(str(folder), "image_folder")
    reference = ImageFolder(str(folder))
    assert [(dataset.name(i), dataset.label(i)) for i in range(len(dataset))] == \
        [(path, label) for path, label in reference.samples]
    assert detect_format(str(folder)) == "image_folder"


@pytest.mark.pytorch
@pytest.mark.parametrize("raw", [False, True])
def test_a_caffe_lmdb_holds_the_folders_samples(folder, tmp_path, raw):
    lmdb = tmp_path / "lmdb"
    builder = PYTHON_DIR / "pytorch_benchmarks" / "build_caffe_lmdb.py"
    done = subprocess.run([sys.executable, str(builder), "--image_folder", str(folder),
                           "--output", str(lmdb), *(["--raw", "--resize", "0"] if raw else [])],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    images = open_dataset(str(folder), "image_folder")
    records = open_dataset(str(lmdb), detect_format(str(lmdb)))
    assert len(records) == len(images)
    by_label = sorted(range(len(records)), key=lambda i: (records.label(i), records.name(i)))
    assert [records.label(i) for i in by_label] == [images.label(i) for i in range(len(images))]
    # PNG is lossless: the same pixels, raw (CHW, BGR) or encoded, give the same arrays.
    ours = sorted(preprocessed(records, range(len(records)), 32).tolist())
    theirs = sorted(preprocessed(images, range(len(images)), 32).tolist())
    assert ours == theirs


@pytest.mark.mxnet
def test_recordio_is_read_without_mxnet_as_mxnet_wrote_it(folder, tmp_path):
    import mxnet as mx

    images = open_dataset(str(folder), "image_folder")
    path = tmp_path / "data.rec"
    writer = mx.recordio.MXRecordIO(str(path), "w")
    magic = (0xCED7230A).to_bytes(4, "little")
    for index in range(len(images)):
        data = Path(images.name(index)).read_bytes()
        header = mx.recordio.IRHeader(0, float(images.label(index)), index, 0)
        writer.write(mx.recordio.pack(header, data))
    # A record whose payload holds the magic word is stored in parts; one with a label array.
    writer.write(mx.recordio.pack(mx.recordio.IRHeader(0, 2.0, 99, 0),
                                  Path(images.name(0)).read_bytes() + magic * 3 + b"x"))
    writer.write(mx.recordio.pack(mx.recordio.IRHeader(2, [1.0, 7.0], 100, 0),
                                  Path(images.name(1)).read_bytes()))
    writer.close()
    records = open_dataset(str(path), detect_format(str(path)))
    assert detect_format(str(tmp_path)) == "recordio"
    assert len(records) == len(images) + 2
    assert [records.label(i) for i in range(len(images))] == \
        [images.label(i) for i in range(len(images))]
    np.testing.assert_array_equal(preprocessed(records, range(len(images)), 32),
                                  preprocessed(images, range(len(images)), 32))
    reader = mx.recordio.MXRecordIO(str(path), "r")
    for _ in range(len(images)):
        reader.read()
    _, payload = mx.recordio.unpack(reader.read())
    assert records._record(len(images)).endswith(payload)  # the parts were joined again
    assert records.label(len(images)) == 2 and records.label(len(images) + 1) == 1


def test_a_broken_image_is_named(folder, tmp_path):
    bad = tmp_path / "bad"
    (bad / "only").mkdir(parents=True)
    (bad / "only" / "broken.png").write_bytes(b"\x89PNG not really")
    dataset = open_dataset(str(bad), "image_folder")
    with pytest.raises(DatasetError, match="broken.png: not an image"):
        preprocessed(dataset, [0], 32)


@pytest.mark.parametrize(("make", "kind", "message"), [
    (lambda p: p, "image_folder", "no such file"),
    (lambda p: (p.mkdir(), p)[1], "image_folder", "no class sub-folders"),
    (lambda p: (p.mkdir(), p)[1], "caffe_lmdb", "no data.mdb"),
    (lambda p: (p.write_bytes(b"\x00" * 16), p)[1], "recordio", "not a RecordIO file"),
])
def test_unusable_datasets_are_one_clear_error(tmp_path, make, kind, message):
    path = make(tmp_path / "dataset")
    with pytest.raises(DatasetError, match=message):
        open_dataset(str(path), kind)


def test_the_shared_package_imports_only_what_backends_have():
    allowed = set(sys.stdlib_module_names) | {"numpy", "PIL", "lmdb", "mlperf_loadgen",
                                              "benchmark_common"}
    for path in sorted((PYTHON_DIR / "benchmark_common").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def test_the_shared_package_and_the_dummy_run_on_python_3_8():
    # Old framework images (MXNet's) and bare containers have an older Python than dlbs.
    import os
    import shutil

    vermin = shutil.which("vermin", path=os.path.dirname(sys.executable))
    assert vermin, "vermin is a test dependency (pip install -e '.[test]')"
    result = subprocess.run([vermin, "-t=3.8-", "--no-tips", "--violations",
                             str(PYTHON_DIR / "benchmark_common"),
                             str(PYTHON_DIR / "dummy_benchmarks" / "benchmarks.py")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
