"""MXNet: `dlbs run` reports the top-1 a plain loop computes, from a folder, RecordIO, LMDB.

As for PyTorch: a tiny colour classifier (registered through mxnet.extra_models) is trained
here, saved with `save_parameters`, and evaluated on images where every fourth one shows the
next class's colour.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from evaluation_helpers import (
    FOUR_CLASSES_TOP5,
    MXNET_MODELS,
    PYTHON_DIR,
    logs_by_scenario,
    make_image_folder,
    reported_accuracy,
    run_backend,
    top_k_fractions,
    training_batch,
)

pytestmark = [pytest.mark.mxnet, pytest.mark.slow]
CLASSES = 4


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(models file, weights file, evaluation folder, plain loop's (top1, top5))."""
    import mxnet as mx
    from benchmark_common.datasets import open_dataset
    from benchmark_common.preprocess import preprocess
    from mxnet import autograd, gluon

    root = tmp_path_factory.mktemp("mxnet_eval")
    models = root / "models.py"
    models.write_text(MXNET_MODELS)
    namespace: dict = {}
    exec(compile(MXNET_MODELS.split("@register_model")[0].replace(
        "from mxnet_benchmarks.models import Model, register_model", ""), "models", "exec"),
        namespace)
    mx.random.seed(0)
    net = namespace["tiny_classifier"](CLASSES)
    net.initialize(mx.init.Xavier())
    images, labels = training_batch(CLASSES, 128, seed=1)
    data, targets = mx.nd.array(images), mx.nd.array(labels)
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.05})
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(80):
        with autograd.record():
            value = loss(net(data), targets)
        value.backward()
        trainer.step(len(labels))
    weights = root / "tiny.params"
    net.save_parameters(str(weights))
    folder = make_image_folder(root / "eval", CLASSES, per_class=12, seed=2, mislabeled_every=4)
    # The plain loop: every image of the folder, preprocessed, through the network.
    dataset = open_dataset(str(folder), "image_folder")
    batch = np.stack([preprocess(dataset.image(i), 32) for i in range(len(dataset))])
    scores = net(mx.nd.array(batch)).asnumpy()
    expected = top_k_fractions(scores, [dataset.label(i) for i in range(len(dataset))])
    assert 0.6 <= expected[0] <= 0.8
    return models, weights, folder, expected


def test_accuracy_is_the_plain_loops_on_a_folder(run_dlbs, tmp_path, trained):
    models, weights, folder, (top1, top5) = trained
    result = run_dlbs("run", "-P", "exp.framework=mxnet", "-P", "exp.model=tiny_colours_mx",
                      "-P", f"mxnet.extra_models={models}", "-P", f"exp.weights={weights}",
                      "-P", f"exp.data_dir={folder}", "-P", "exp.replica_batch=5",
                      "-P", "exp.scenario=accuracy")
    assert result.returncode == 0, result.stderr
    values = logs_by_scenario(tmp_path / "logs")["accuracy"]
    assert reported_accuracy(values) == (top1, FOUR_CLASSES_TOP5) and top5 == 1.0
    assert values["results.num_samples"] == 48


@pytest.mark.parametrize("kind", ["recordio", "caffe_lmdb"])
def test_accuracy_is_the_same_from_recordio_and_lmdb(tmp_path, trained, kind):
    import mxnet as mx
    from benchmark_common.datasets import open_dataset

    models, weights, folder, (top1, top5) = trained
    if kind == "recordio":
        data = tmp_path / "eval.rec"
        writer = mx.recordio.MXRecordIO(str(data), "w")
        dataset = open_dataset(str(folder), "image_folder")
        for index in range(len(dataset)):
            header = mx.recordio.IRHeader(0, float(dataset.label(index)), index, 0)
            writer.write(mx.recordio.pack(header, Path(dataset.name(index)).read_bytes()))
        writer.close()
    else:
        data = tmp_path / "eval_lmdb"
        subprocess.run([sys.executable, str(PYTHON_DIR / "pytorch_benchmarks" /
                                            "build_caffe_lmdb.py"), "--image_folder",
                        str(folder), "--output", str(data)], check=True, capture_output=True,
                       timeout=120)
    run = run_backend("mxnet", "--model", "tiny_colours_mx", "--extra_models", str(models),
                      "--weights", str(weights), "--data_dir", str(data), "--device", "cpu",
                      "--forward_only", "--batch_size", "7", "--scenario", "accuracy",
                      "--loadgen_dir", str(tmp_path / "lg"))
    assert run.returncode == 0, run.stderr
    assert reported_accuracy(run.values) == (top1, FOUR_CLASSES_TOP5) and top5 == 1.0


def test_random_weights_score_one_in_k(tmp_path, trained):
    noise = make_image_folder(tmp_path / "noise", 10, per_class=20, seed=3, noise_only=True)
    run = run_backend("mxnet", "--model", "tiny_ten_mx", "--extra_models", str(trained[0]),
                      "--data_dir", str(noise), "--device", "cpu", "--forward_only",
                      "--batch_size", "16", "--scenario", "accuracy",
                      "--loadgen_dir", str(tmp_path / "lg"))
    assert run.returncode == 0, run.stderr
    assert run.values["results.top1"] == pytest.approx(0.1, abs=0.085)
    assert run.values["results.top5"] == pytest.approx(0.5, abs=0.14)


def server(tmp_path, trained, *flags: str):
    """The trained tiny model as a server on the CPU, with `flags` (later flags win)."""
    models, weights, _, _ = trained
    return run_backend("mxnet", "--model", "tiny_colours_mx", "--extra_models", str(models),
                       "--weights", str(weights), "--device", "cpu", "--forward_only",
                       "--scenario", "server", "--latency_bound_ms", "1000",
                       "--loadgen_dir", str(tmp_path / "lg"), *flags)


def test_latency_scenarios_and_weights_that_do_not_fit(tmp_path, trained):
    models, weights, _, _ = trained
    run = server(tmp_path, trained, "--batch_size", "4", "--target_qps", "20",
                 "--min_duration_s", "0.5", "--min_query_count", "10")
    assert run.returncode == 0, run.stderr
    assert run.values["results.latency_bound_met"] is True
    assert 0 < run.values["results.latency_p50"] <= run.values["results.latency_p99"]
    wrong = run_backend("mxnet", "--model", "tiny_ten_mx", "--extra_models", str(models),
                        "--weights", str(weights), "--device", "cpu", "--forward_only",
                        "--scenario", "offline", "--loadgen_dir", str(tmp_path / "lg2"))
    assert wrong.returncode == 2
    assert "cannot be loaded into model tiny_ten_mx" in wrong.stderr
    assert "Traceback" not in wrong.stderr


def test_predict_classifies_images_and_names_a_bad_one(tmp_path, trained):
    models, weights, folder, _ = trained
    image = sorted(Path(folder).rglob("*.png"))[0]
    (tmp_path / "labels.txt").write_text("red\ngreen\nblue\nyellow\n")
    (tmp_path / "bad.png").write_text("not an image")
    run = run_backend("mxnet", "--model", "tiny_colours_mx", "--extra_models", str(models),
                      "--weights", str(weights), "--device", "cpu", "--forward_only",
                      "--labels", str(tmp_path / "labels.txt"), "--top", "2",
                      "--predict", str(image), str(tmp_path / "bad.png"))
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if line.startswith("__predict.result__=")]
    good, bad = (json.loads(line.split("=", 1)[1]) for line in lines)
    assert good["image"] == str(image) and len(good["top"]) == 2
    assert good["top"][0]["name"] == "red"  # class_00 shows the first colour
    assert good["top"][0]["probability"] >= good["top"][1]["probability"]
    assert "not an image" in bad["error"]


def test_every_bucket_is_bound_before_the_run_and_padding_is_exact(trained):
    # docs/evaluation.md: a server's batch sizes (1, 2, 4, 8) each run before LoadGen starts,
    # from buffers of their own; a batch in between padded up gives the unpadded outputs.
    import mxnet as mx
    from mxnet_benchmarks.errors import BenchmarkError
    from mxnet_benchmarks.evaluation import MXNetSystem
    from mxnet_benchmarks.models import create_model, load_model_file
    from mxnet_benchmarks.options import parse_options
    from mxnet_benchmarks.runner import build_network

    models, weights, _, _ = trained
    opts = parse_options(["--model", "tiny_colours_mx", "--extra_models", str(models),
                          "--weights", str(weights), "--device", "cpu", "--forward_only",
                          "--batch_size", "8", "--scenario", "server", "--target_qps", "5"])
    try:
        model = create_model(opts.model)
    except BenchmarkError:  # not registered in this process yet
        load_model_file(opts.extra_models)
        model = create_model(opts.model)
    net = build_network(model, opts, [mx.cpu()])
    system = MXNetSystem(model, opts, mx.cpu(), net)
    resident = list(range(8))
    system.prepare([1, 2, 4, 8], 1, resident)
    assert system.sizes == [1, 2, 4, 8] and sorted(system.inputs) == [1, 2, 4, 8]
    for count in range(1, 9):
        batch = system.batch(resident[:count])
        assert np.array_equal(system.forward(batch).asnumpy(), net(batch).asnumpy()), count
        assert system.infer(resident[:count], top=2)[0].shape == (count, 2)
    assert system.compilations() == 0
    system.infer(list(range(9)))  # larger than every prepared size: counted
    assert system.compilations() == 1


def test_a_server_of_many_batch_sizes_records_no_recompiles(tmp_path, trained):
    models = trained[0]
    run = server(tmp_path, trained, "--batch_size", "8", "--target_qps", "200",
                 "--max_queue_delay_ms", "20", "--min_duration_s", "1",
                 "--min_query_count", "20")
    assert run.returncode == 0, run.stderr
    assert run.values["results.recompiles"] == 0
    assert "prepare: batch sizes [1, 2, 4, 8]" in run.stdout
    refused = run_backend("mxnet", "--model", "tiny_colours_mx", "--extra_models", str(models),
                          "--device", "cpu", "--forward_only", "--scenario", "offline",
                          "--inference_streams", "2", "--loadgen_dir", str(tmp_path / "lg2"))
    assert refused.returncode == 2 and "one batch in flight" in refused.stderr
