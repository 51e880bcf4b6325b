"""Inference evaluation with MXNet: the network as LoadGen's system under test.

`evaluate(opts, abort)` runs `--scenario` (through `benchmark_common.harness`) or `--predict`
on one context (one GPU, or the CPU), and returns the protocol's results. The samples are
synthetic (distinct random samples, class i % classes) or the first samples of `--data_dir`
(a RecordIO file, a Caffe LMDB or an image folder, told apart by what the path holds),
preprocessed once by `benchmark_common.preprocess` (the same numbers as the PyTorch
backend's) and kept on the context while LoadGen has them loaded. See docs/evaluation.md.

Every batch size the scenario forms is run before LoadGen starts (`prepare`: each shape's
graph is bound, its memory planned, oneDNN's primitives made), each from an input buffer of
its own; a smaller batch is copied into the next prepared size's buffer and the padding's
outputs are dropped, so that the network meets no shape inside the run. MXNet has no
counter of its own for what it re-plans: `compilations` counts the batches no prepared size
holds. One lane: Gluon's cached graphs are not for several threads at once, so the plan
refuses `exp.inference_streams` above 1 and several GPUs for MXNet scenarios.
"""

from __future__ import annotations

import bisect
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
        self.asynchronous = context.device_type == "gpu"  # MXNet's engine runs it meanwhile
        self.sizes: list[int] = []
        self.inputs: dict[int, mx.nd.NDArray] = {}
        self.sealed = False
        #: Batches met after `prepare` that no prepared size holds (run as they came).
        self.unprepared = 0
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
        """The network's output, the batch copied into the next prepared size's buffer."""
        count = batch.shape[0]
        at = bisect.bisect_left(self.sizes, count)
        if at == len(self.sizes):
            if self.sealed:
                self.unprepared += 1
            return self.net(batch)
        size = self.sizes[at]
        static = self.inputs[size]
        static[0:count] = batch
        output = self.net(static)
        return output if count == size else output[0:count]

    def submit(self, indices: Sequence[int], top: int = 0,
               lane: int = 0) -> Callable[[], TopK | None]:
        """Start a batch (MXNet's engine runs it asynchronously); the function waits."""
        output = self.forward(self.batch(indices))
        if top:
            return lambda: top_classes(output, top)
        return output.wait_to_read

    def prepare(self, batch_sizes: Sequence[int], repeats: int,
                resident: Sequence[int]) -> None:
        for size in sorted(set(batch_sizes), reverse=True):
            indices = [resident[i % len(resident)] for i in range(size)]
            self.inputs[size] = self.batch(indices).copy()
            self.sizes = sorted(self.inputs)
            for _ in range(repeats):
                self.forward(self.inputs[size]).wait_to_read()
        mx.nd.waitall()
        self.sealed = True

    def compilations(self) -> int:
        return self.unprepared


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
    if evaluation.scenario != "benchmark" and (len(contexts) > 1 or
                                               evaluation.inference_streams > 1):
        raise BenchmarkError(f"--scenario {evaluation.scenario} runs on one context with one "
                             f"batch in flight in MXNet (got {len(contexts)} context(s), "
                             f"--inference_streams {evaluation.inference_streams})")
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
