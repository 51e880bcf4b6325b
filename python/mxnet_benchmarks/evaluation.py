"""Inference evaluation with MXNet: the network as LoadGen's system under test.

`evaluate(opts, abort)` runs `--scenario` (through `benchmark_common.harness`) or `--predict`
on one context (one GPU, or the CPU), and returns the protocol's results. The samples are
synthetic (distinct random samples, class i % classes) or the first samples of `--data_dir`
(a RecordIO file, a Caffe LMDB or an image folder, told apart by what the path holds),
preprocessed once by `benchmark_common.preprocess` (the same numbers as the PyTorch
backend's) and kept on the context while LoadGen has them loaded. See docs/evaluation.md.

A hybridized network with a static graph (`--static_graph`) plans its memory per shape: it
runs only the batch sizes the scenario prepared, a smaller batch padded up to the next one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mxnet as mx
import numpy as np
from benchmark_common.accuracy import LabelsError, read_labels
from benchmark_common.datasets import DatasetError, detect_format, open_dataset
from benchmark_common.harness import EvaluationSetupError, run_evaluation
from benchmark_common.predict import predict_images
from benchmark_common.system import ResidentSamples, TopK

from .errors import BenchmarkError
from .models import Model, create_model, load_model_file
from .options import Options
from .protocol import emit, say
from .runner import _device_memory_mib, build_network, make_contexts


class MXNetSystem(ResidentSamples):
    """A Gluon network on one context and its samples, for the harness."""

    def __init__(self, model: Model, opts: Options, context: mx.Context, net: Any) -> None:
        self.model = model
        self.context = context
        self.dtype = opts.dtype
        self.net = net
        self.static = opts.hybridize and opts.static_graph
        self.sizes: list[int] = []
        self.title = model.title
        self.num_classes = model.num_classes
        self.image_size = model.input_shape[-1]
        dataset = None
        if opts.data_dir:
            if not model.accepts_images:
                raise DatasetError(f"model {model.model_id!r} does not take images: use "
                                   "synthetic data (no --data_dir)")
            dataset = open_dataset(opts.data_dir, detect_format(opts.data_dir))
        self.open_samples(dataset, opts.data_dir, opts.evaluation.num_samples, opts.batch_size)

    # -- the query sample library (the rest is ResidentSamples's) -----------------------------
    def to_device(self, images: np.ndarray) -> mx.nd.NDArray:
        return mx.nd.array(images, ctx=self.context, dtype=self.dtype)

    def synthetic(self, count: int) -> mx.nd.NDArray:
        rng = np.random.default_rng(0)
        return self.to_device(rng.standard_normal((count, *self.model.input_shape),
                                                  dtype=np.float32))

    # -- the system under test -----------------------------------------------------------
    def batch(self, indices: Sequence[int]) -> mx.nd.NDArray:
        """The resident samples `indices` as one batch on the context."""
        assert self.pool is not None, "no samples are loaded"
        if len(indices) == 1:
            row = self.rows[indices[0]]
            return self.pool[row:row + 1]
        rows = mx.nd.array([self.rows[index] for index in indices], ctx=self.context,
                           dtype="int64")
        return mx.nd.take(self.pool, rows, axis=0)

    def forward(self, batch: mx.nd.NDArray) -> mx.nd.NDArray:
        """The network's output, padding the batch to a prepared size with a static graph."""
        count = batch.shape[0]
        size = next((s for s in self.sizes if s >= count), None) if self.static else None
        if size is None or size == count:
            return self.net(batch)
        padding = mx.nd.zeros((size - count, *batch.shape[1:]), ctx=self.context,
                              dtype=self.dtype)
        return self.net(mx.nd.concat(batch, padding, dim=0))[:count]

    def infer(self, indices: Sequence[int], top: int = 0) -> TopK | None:
        output = self.forward(self.batch(indices))
        if top:
            return top_classes(output, top)
        output.wait_to_read()
        return None

    def warm_up(self, batch_sizes: Sequence[int], repeats: int) -> None:
        resident = sorted(self.rows)
        for size in sorted(set(batch_sizes)):
            indices = [resident[i % len(resident)] for i in range(size)]
            for _ in range(repeats):
                self.forward(self.batch(indices)).wait_to_read()
            self.sizes = sorted({*self.sizes, size})
        mx.nd.waitall()


def top_classes(output: mx.nd.NDArray, top: int) -> TopK:
    """The `top` best classes and their softmax probabilities, as numpy arrays."""
    logits = output.astype("float32").asnumpy().astype(np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    probabilities = np.exp(logits)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    count = min(top, probabilities.shape[1])
    classes = np.argsort(-probabilities, axis=1, kind="stable")[:, :count]
    return classes, np.take_along_axis(probabilities, classes, axis=1)


def evaluate(opts: Options, abort: Callable[[BaseException], None]) -> dict[str, Any]:
    """Run the evaluation the flags ask for; return the results to print."""
    evaluation = opts.evaluation
    if opts.extra_models:
        load_model_file(opts.extra_models)
    model = create_model(opts.model, opts.num_classes)
    if evaluation.scenario == "accuracy" and not opts.data_dir:
        raise BenchmarkError("--scenario accuracy needs a dataset (--data_dir)")
    mx.random.seed(opts.seed)
    contexts = make_contexts(opts)
    net = build_network(model, opts, contexts)
    say(f"evaluation: model={model.model_id} scenario={evaluation.scenario} "
        f"context={contexts[0]} dtype={opts.dtype} batch={opts.batch_size} "
        f"hybridize={opts.hybridize} static_graph={opts.static_graph} "
        f"weights={evaluation.weights or '(random)'}")
    results: dict[str, Any] = {"exp.model_title": model.title}
    try:
        if evaluation.predict:
            _predict(model, opts, contexts[0], net)
        else:
            system = MXNetSystem(model, opts, contexts[0], net)
            results.update(run_evaluation(system, evaluation, batch_size=opts.batch_size,
                                          warmup=opts.num_warmup_batches, say=say,
                                          abort=abort))
    except (DatasetError, EvaluationSetupError, LabelsError) as error:
        raise BenchmarkError(str(error)) from None
    results["results.mem_peak"] = _device_memory_mib(contexts)
    return results


def _predict(model: Model, opts: Options, context: mx.Context, net: Any) -> None:
    if not model.accepts_images:
        raise BenchmarkError(f"--predict classifies images; model {model.model_id!r} does not "
                             "take images")
    names = read_labels(opts.evaluation.labels, model.num_classes) \
        if opts.evaluation.labels else None

    def classify(batch: np.ndarray, top: int) -> TopK:
        return top_classes(net(mx.nd.array(batch, ctx=context, dtype=opts.dtype)), top)

    failed = predict_images(opts.evaluation.predict, model.input_shape[-1], classify,
                            opts.evaluation.top, names, emit)
    if failed:
        say(f"{failed} of {len(opts.evaluation.predict)} images could not be classified")
