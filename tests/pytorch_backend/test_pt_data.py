"""Real datasets: image_folder and caffe_lmdb on tiny generated data; their errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pytorch_backend_helpers import BUILDER, make_image_folder

pytestmark = pytest.mark.pytorch


def build_lmdb(image_folder, output, *extra):
    proc = subprocess.run(
        [
            sys.executable,
            str(BUILDER),
            "--image_folder",
            str(image_folder),
            "--output",
            str(output),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc


@pytest.fixture(scope="module")
def lmdb_dirs(image_folder, tmp_path_factory):
    """The tiny image folder as an encoded and as a raw (resized) Caffe LMDB."""
    root = tmp_path_factory.mktemp("lmdb")
    encoded = build_lmdb(image_folder, root / "encoded")
    raw = build_lmdb(image_folder, root / "raw", "--raw", "--resize", "36", "--shuffle")
    assert encoded.returncode == 0 and raw.returncode == 0, encoded.stderr + raw.stderr
    assert "wrote 12 records" in encoded.stdout
    return {"encoded": root / "encoded", "raw": root / "raw"}


@pytest.mark.parametrize("kind", ["encoded", "raw"])
def test_lmdb_dataset_reads_back_images_and_labels(lmdb_dirs, kind):
    from pytorch_benchmarks.data.caffe_lmdb import CaffeLmdbDataset
    from pytorch_benchmarks.data.transforms import image_transform

    dataset = CaffeLmdbDataset(lmdb_dirs[kind], image_transform(32, training=False))
    assert len(dataset) == 12
    labels = sorted(dataset[i][1] for i in range(len(dataset)))
    assert labels == [0] * 4 + [1] * 4 + [2] * 4
    image, _ = dataset[0]
    assert tuple(image.shape) == (3, 32, 32)


def test_raw_records_keep_colours_in_rgb_order(lmdb_dirs, image_folder):
    """Raw records are BGR as Caffe writes them; the reader turns them back into RGB."""
    import torchvision.transforms as T
    from pytorch_benchmarks.data.caffe_lmdb import CaffeLmdbDataset

    dataset = CaffeLmdbDataset(lmdb_dirs["raw"], T.PILToTensor())
    colours = {}
    for index in range(len(dataset)):
        pixels, label = dataset[index]
        colours.setdefault(label, set()).add(tuple(pixels[:, 0, 0].tolist()))
    # class_0 images are (10*i, 255, 7*i): green is 255 in every one of them.
    assert all(green == 255 for _, green, _ in colours[0])


@pytest.mark.parametrize("backend_name", ["image_folder", "caffe_lmdb"])
@pytest.mark.parametrize("phase", ["training", "inference"])
def test_benchmark_on_real_data(
    backend, extra_models, image_folder, lmdb_dirs, backend_name, phase
):
    data_dir = image_folder if backend_name == "image_folder" else lmdb_dirs["encoded"]
    run = backend(
        "--model",
        "tiny_cnn",
        "--extra_models",
        str(extra_models),
        "--device",
        "cpu",
        "--batch_size",
        "4",
        "--num_batches",
        "5",
        "--num_warmup_batches",
        "1",
        "--data_dir",
        str(data_dir),
        "--data_backend",
        backend_name,
        "--data_shuffle",
        "true",
        "--num_loader_threads",
        "1",
        "--forward_only",
        str(phase == "inference"),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    values = run.values
    assert values["results.status"] == "ok"
    # 12 images, batch 4: five batches run over two epochs.
    assert len(values["results.time_data"]) == 5
    assert 0.0 <= values["results.time_data_wait"] <= values["results.time"]


def test_resnet18_inference_on_image_folder(backend, image_folder):
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
        "--data_dir",
        str(image_folder),
        "--data_backend",
        "image_folder",
        "--forward_only",
        "--num_loader_threads",
        "0",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.values["results.status"] == "ok"


def test_data_loader_only(backend, extra_models, image_folder):
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
        "3",
        "--data_dir",
        str(image_folder),
        "--data_backend",
        "image_folder",
        "--data_loader_only",
        "--num_loader_threads",
        "0",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.values["results.throughput"] > 0


def test_missing_data_dir_fails_the_run(backend, tmp_path):
    run = backend(
        "--model",
        "resnet18",
        "--device",
        "cpu",
        "--batch_size",
        "2",
        "--num_batches",
        "1",
        "--data_dir",
        str(tmp_path / "missing"),
        "--data_backend",
        "image_folder",
    )
    assert run.returncode != 0
    assert run.values["results.status"] == "failure"
    assert "no such directory" in run.values["results.status_msg"]
    assert "results.throughput" not in run.values


def _source(data_dir, backend_name, model="resnet18", batch=2):
    import torch
    from pytorch_benchmarks.data.sources import make_loader_source
    from pytorch_benchmarks.models import get_model_spec

    return make_loader_source(
        get_model_spec(model),
        data_dir=str(data_dir),
        backend=backend_name,
        training=True,
        batch_size=batch,
        shuffle=False,
        num_workers=0,
        device=torch.device("cpu"),
        dtype=torch.float32,
        memory_format=torch.contiguous_format,
        world_size=1,
        rank=0,
    )


@pytest.mark.parametrize(
    ("make_dir", "backend_name", "fragment"),
    [
        (lambda p: p / "missing", "caffe_lmdb", "no such directory"),
        (lambda p: p, "image_folder", "the directory is empty"),
        (lambda p: p, "caffe_lmdb", "the directory is empty"),
        (lambda p: (p / "x").mkdir() or p, "caffe_lmdb", "no data.mdb"),
        (lambda p: (p / "x").mkdir() or p, "image_folder", "Found no valid file"),
    ],
    ids=["missing", "empty-folder", "empty-lmdb", "not-lmdb", "no-images"],
)
def test_bad_data_dir_is_a_clear_error(tmp_path, make_dir, backend_name, fragment):
    from pytorch_benchmarks.data.sources import DataError

    with pytest.raises(DataError) as info:
        _source(make_dir(tmp_path), backend_name)
    assert fragment in str(info.value)
    assert "--data_dir" in str(info.value)


def test_too_small_dataset_and_non_image_model_are_refused(tmp_path, image_folder):
    from pytorch_benchmarks.data.sources import DataError

    small = make_image_folder(tmp_path / "small", classes=1, per_class=2)
    with pytest.raises(DataError, match="fewer than --batch_size 4"):
        _source(small, "image_folder", batch=4)
    with pytest.raises(DataError, match="not images"):
        _source(image_folder, "image_folder", model="sensor_net")


def test_builder_refuses_a_folder_without_classes(tmp_path):
    proc = build_lmdb(tmp_path, tmp_path / "out")
    assert proc.returncode == 2
    assert "no class sub-folders" in proc.stderr
