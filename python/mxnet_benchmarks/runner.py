"""One benchmark run: contexts, kvstore, network, then warm-up and timed batches.

Every batch, warm-up or timed, ends with `mx.nd.waitall()`: MXNet's engine is
asynchronous, and without the wait a timer would measure how fast work is queued.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import mxnet as mx
from benchmark_common.memory import peak_rss_mib
from benchmark_common.timed_marks import TimedMarks
from mxnet import autograd, gluon

from .data import RecordIOBatches, SyntheticBatches
from .errors import BenchmarkError
from .models import Model, create_model, load_model_file
from .options import Options
from .protocol import emit
from .tracing import Tracer, in_phase

#: The name MXNet 1.x registers its oneDNN (formerly MKL-DNN) CPU fusion backend under.
ONEDNN_SUBGRAPH_BACKEND = "MKLDNN"


@dataclass
class Report:
    """What rank 0 prints: timings and the facts around them."""

    model_title: str
    instances_per_batch: int
    warmup_ms: list[float]
    times_ms: list[float]
    waits_ms: list[float]
    mem_peak_mib: float
    real_data: bool
    #: `results.trace_file` (or `results.trace_error`) of a traced pass.
    trace: dict = field(default_factory=dict)


def make_contexts(opts: Options) -> list[mx.Context]:
    """`cpu(0) ..`, or `gpu(0) .. gpu(N-1)`: one process drives every GPU of its node."""
    if opts.device == "cpu":
        return [mx.cpu(index) for index in range(opts.cpu_contexts)]
    try:
        available = mx.context.num_gpus()
    except mx.base.MXNetError as error:
        raise BenchmarkError(f"--device gpu: MXNet cannot query GPUs: {error}") from error
    if available < opts.num_gpus:
        build = "" if mx.runtime.Features().is_enabled("CUDA") else " (this MXNet has no CUDA)"
        raise BenchmarkError(
            f"--num_gpus {opts.num_gpus} but MXNet sees {available} GPU(s){build}"
        )
    return [mx.gpu(index) for index in range(opts.num_gpus)]


def make_kvstore(opts: Options) -> mx.kvstore.KVStore | str:
    """A `dist_*` kvstore joins the parameter server described by `DMLC_*` at once.

    `local` and `device` stay names: Gluon's Trainer then creates them only when there is
    more than one context to aggregate, as MXNet's Module did for DLBS.
    """
    if not opts.is_distributed:
        return opts.kv_store
    if "DMLC_PS_ROOT_URI" not in os.environ:
        raise BenchmarkError(
            f"--kv_store {opts.kv_store} needs a scheduler and servers (the DMLC_* "
            "variables are not set); start the job with python -m "
            "mxnet_benchmarks.launch_dist"
        )
    return mx.kv.create(opts.kv_store)


def build_network(model: Model, opts: Options, contexts: list[mx.Context]) -> gluon.Block:
    """The initialised, cast and (optionally) hybridized network."""
    net = model.build()
    net.initialize(mx.init.Xavier(magnitude=2.0), ctx=contexts)
    if opts.evaluation.weights:
        load_weights(net, opts.evaluation.weights, model, contexts)
    if opts.dtype != "float32":
        net.cast(opts.dtype)
    if opts.hybridize:
        backend = ONEDNN_SUBGRAPH_BACKEND if opts.graph_backend == "onednn" else None
        net.hybridize(static_alloc=opts.static_graph, static_shape=opts.static_graph,
                      backend=backend)
    return net


def load_weights(net: gluon.Block, path: str, model: Model,
                 contexts: list[mx.Context]) -> None:
    """Trained weights (`--weights`): a `.params` file saved by `net.save_parameters`."""
    if not os.path.isfile(path):
        raise BenchmarkError(f"--weights {path}: no such file")
    try:
        net.load_parameters(path, ctx=contexts)
    except (mx.base.MXNetError, AssertionError, ValueError, OSError) as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = lines[-1] if lines and lines[0].startswith("Traceback") else (
            lines[0] if lines else type(error).__name__)
        saved = _saved_class_count(reason, model.num_classes)
        hint = "" if saved is None else (
            f"; the weights have {saved} classes, the model {model.num_classes}: set "
            f"exp.num_classes to {saved} (the backend's --num_classes {saved})")
        raise BenchmarkError(f"--weights {path} cannot be loaded into model {model.model_id}: "
                             f"{reason}{hint}") from None


#: MXNet's message for a parameter of another shape: "... expected (1000, 512) vs saved (10,
#: 512)" (a deferred input size shows as 0).
_SHAPES = re.compile(r"expected \((\d+)\b[^)]*\) vs saved \((\d+)\b")


def _saved_class_count(reason: str, num_classes: int) -> int | None:
    """The saved parameter's first dimension, where MXNet refused the model's last layer."""
    match = _SHAPES.search(reason)
    if match and int(match.group(1)) == num_classes and int(match.group(2)) != num_classes:
        return int(match.group(2))
    return None


def _device_memory_mib(contexts: list[mx.Context]) -> float:
    """Host peak RSS on CPU; on GPU the most memory in use on any of our cards.

    MXNet 1.x has no per-process peak counter for GPUs, so the GPU figure is total minus
    free memory sampled after each batch (other processes on the card would count too).
    """
    if contexts[0].device_type == "cpu":
        return peak_rss_mib()
    used = []
    for ctx in contexts:
        free, total = mx.context.gpu_memory_info(ctx.device_id)
        used.append((total - free) / 2**20)
    return max(used)


def _no_phase(name: str) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext()


def _training_step(net, model: Model, opts: Options, kvstore, instances_per_batch: int,
                   phase: Callable[[str], contextlib.AbstractContextManager] = _no_phase,
                   ) -> Callable[[list, list], None]:
    loss_fn = model.loss()
    optimizer = mx.optimizer.SGD(
        learning_rate=opts.learning_rate, momentum=0.9, wd=1e-4,
        multi_precision=opts.dtype == "float16",
    )
    # Gluon skips a local/device kvstore when there is one context (nothing to aggregate);
    # dist kvstores are always used, and update the weights on the servers.
    trainer = gluon.Trainer(net.collect_params(), optimizer, kvstore=kvstore)

    def step(data: list, labels: list) -> None:
        with phase("forward"), autograd.record():
            losses = [loss_fn(net(x).astype("float32"), y) for x, y in zip(data, labels)]
        with phase("backward"):
            autograd.backward(losses)
        # The gradient is a sum over the job's batch; the step divides by that size.
        with phase("optimizer"):
            trainer.step(instances_per_batch)

    return step


def _inference_step(net) -> Callable[[list, list], None]:
    def step(data: list, labels: list) -> None:
        for x in data:
            net(x)

    return step


def run(opts: Options) -> tuple[Report, int]:
    """Run the benchmark; return the report and this process's rank (0 prints it)."""
    if opts.extra_models:
        load_model_file(opts.extra_models)
    model = create_model(opts.model, opts.num_classes)
    mx.random.seed(opts.seed)
    contexts = make_contexts(opts)
    kvstore = make_kvstore(opts)
    rank, num_workers = (0, 1) if isinstance(kvstore, str) else (kvstore.rank,
                                                                  kvstore.num_workers)
    instances_per_batch = opts.batch_size * len(contexts) * num_workers

    if opts.data_dir:
        batches = RecordIOBatches(
            model, opts.data_dir, opts.batch_size, contexts, opts.dtype, opts.data_shuffle,
            opts.preprocess_threads, opts.prefetch_buffer, num_parts=num_workers,
            part_index=rank, seed=opts.seed,
        )
    else:
        batches = SyntheticBatches(model, opts.batch_size, contexts, opts.dtype,
                                   opts.seed + rank)

    net = build_network(model, opts, contexts)
    tracer = _tracer(opts, model, rank) if opts.trace_level != "none" else None
    if opts.forward_only:
        step = _inference_step(net)
        traced_step = in_phase(step, "forward", tracer) if tracer else step
    else:
        step = traced_step = _training_step(net, model, opts, kvstore, instances_per_batch,
                                            tracer.phase if tracer else _no_phase)

    mem_peak = 0.0

    def timed_batch() -> tuple[float, float]:
        nonlocal mem_peak
        start = time.perf_counter()
        data, labels, waited_ms = batches.next()
        step(data, labels)
        mx.nd.waitall()
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        mem_peak = max(mem_peak, _device_memory_mib(contexts))
        return elapsed_ms, waited_ms

    warmup_ms = [timed_batch()[0] for _ in range(opts.num_warmup_batches)]
    if num_workers > 1:
        kvstore._barrier()  # every worker starts its timed batches together
    times_ms, waits_ms = [], []
    marks = TimedMarks(emit, enabled=rank == 0)  # the energy's interval (docs/efficiency.md)
    marks.start()
    for _ in range(opts.num_batches):
        elapsed_ms, waited_ms = timed_batch()
        times_ms.append(elapsed_ms)
        waits_ms.append(waited_ms)
    marks.end()
    # The traced pass comes after the timed batches and never counts in them (nor in mem_peak).
    trace = tracer.run(lambda: batches.next()[:2], traced_step, net, eager=not opts.hybridize) \
        if tracer else {}
    report = Report(
        model_title=model.title, instances_per_batch=instances_per_batch,
        warmup_ms=warmup_ms, times_ms=times_ms, waits_ms=waits_ms, mem_peak_mib=mem_peak,
        real_data=bool(opts.data_dir), trace=trace,
    )
    return report, rank


def _tracer(opts: Options, model: Model, rank: int) -> Tracer:
    """The traced pass's recorder (docs/tracing.md); worker 0 writes the trace."""
    meta = {"framework": "mxnet", "framework_ver": mx.__version__, "model": opts.model,
            "model_title": model.title, "phase": "inference" if opts.forward_only else "training",
            "device": opts.device, "dtype": opts.dtype, "batch_size": opts.batch_size,
            "hybridize": opts.hybridize, "kv_store": opts.kv_store}
    return Tracer(opts.trace_level, opts.trace_batches, opts.trace_file, rank == 0, meta)
