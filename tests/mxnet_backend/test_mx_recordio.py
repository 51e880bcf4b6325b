"""RecordIO input: a small .rec of generated JPEGs, read by ImageRecordIter."""

from __future__ import annotations

import mxnet as mx
import pytest
from mx_helpers import write_record_file
from mxnet_benchmarks.data import RecordIOBatches, find_record_file
from mxnet_benchmarks.errors import BenchmarkError
from mxnet_benchmarks.models import create_model

pytestmark = pytest.mark.mxnet

NUM_IMAGES = 6


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A directory with train.rec: NUM_IMAGES JPEGs of 260x240, larger than 227 and 224."""
    folder = tmp_path_factory.mktemp("recordio")
    labels = write_record_file(folder / "train.rec", NUM_IMAGES, (260, 240))
    return folder, labels


def test_batches_hold_the_records_in_order(dataset):
    folder, labels = dataset
    model = create_model("resnet18")
    batches = RecordIOBatches(model, str(folder), 2, [mx.cpu()], "float32", shuffle=False,
                              threads=1, prefetch=1, num_parts=1, part_index=0, seed=1)
    seen = []
    for _ in range(NUM_IMAGES // 2):
        data, batch_labels, waited_ms = batches.next()
        assert data[0].shape == (2, 3, 224, 224)
        assert waited_ms >= 0
        # ImageNet normalisation leaves values around zero, not 0..255.
        assert -3.5 < float(data[0].mean().asscalar()) < 3.5
        seen.extend(batch_labels[0].asnumpy().tolist())
    assert seen == labels
    data, _, _ = batches.next()  # the next epoch starts by itself
    assert data[0].shape == (2, 3, 224, 224)


@pytest.mark.parametrize(("phase", "model_id"), [("training", "resnet18"),
                                                ("inference", "alexnet_owt")])
def test_backend_reads_recordio(run_backend, dataset, phase, model_id):
    folder, _ = dataset
    run = run_backend("--model", model_id, "--batch_size", "2", "--num_batches", "3",
                      "--num_warmup_batches", "1", "--data_dir", str(folder),
                      "--forward_only", str(phase == "inference"), "--preprocess_threads", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.values["results.status"] == "ok"
    assert len(run.values["results.time_data"]) == 3
    wait = run.values["results.time_data_wait"]
    assert 0 <= wait < run.values["results.time"]


def test_record_file_is_found_in_a_directory_or_given_directly(tmp_path, dataset):
    folder, _ = dataset
    assert find_record_file(str(folder)) == str(folder / "train.rec")
    assert find_record_file(str(folder / "train.rec")) == str(folder / "train.rec")
    (tmp_path / "a.rec").write_bytes(b"")
    (tmp_path / "b.rec").write_bytes(b"")
    with pytest.raises(BenchmarkError, match="exactly one .rec file, found 2"):
        find_record_file(str(tmp_path))
    with pytest.raises(BenchmarkError, match="no such file or directory"):
        find_record_file(str(tmp_path / "missing"))


def test_a_file_of_no_records_is_a_clear_failure(run_backend, tmp_path):
    (tmp_path / "train.rec").write_bytes(bytes(range(256)) * 20)
    run = run_backend("--model", "resnet18", "--batch_size", "2", "--num_batches", "1",
                      "--data_dir", str(tmp_path))
    assert run.returncode == 2
    assert run.values["results.status"] == "failure"
    assert "holds no readable image records" in run.values["results.status_msg"]
    assert "Traceback" not in run.stderr


def test_missing_data_dir_is_a_clear_failure(run_backend, tmp_path):
    run = run_backend("--model", "resnet18", "--data_dir", str(tmp_path / "missing"))
    assert run.returncode == 2
    assert run.values["results.status"] == "failure"
    assert "no such file or directory" in run.values["results.status_msg"]
