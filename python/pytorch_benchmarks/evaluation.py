"""Inference evaluation with PyTorch: the model as LoadGen's system under test.

`evaluate(opts, topology, abort)` runs `--scenario` (through `benchmark_common.harness`) or
`--predict`, and returns the protocol's results. The samples are synthetic (distinct random
samples, class i % classes) or the first samples of `--data_dir`, preprocessed once
(`benchmark_common.preprocess`) and kept on every device in the model's dtype and memory
format while LoadGen has them loaded. See docs/evaluation.md ("Getting the GPU's real
numbers").

One process serves every device of `--num_gpus` (a replica of the model on each) and
`--inference_streams` lanes per device: lane i runs on device i % devices, on a CUDA stream
of its own (a thread of the harness on the CPU). Each lane prepares every batch size the
scenario forms with an input buffer of its own (and, with `--cuda_graphs`, a CUDA graph of
its own, in a memory pool of its own, so that lanes never share intermediate buffers); a
smaller batch is copied into the next prepared size's buffer and the padding's outputs are
dropped. `--compile` compiles each replica once per shape during the preparation: one graph
for each size when the scenario has one (single_stream, multi_stream, offline, accuracy),
else one graph for size 1 and one whose batch is dynamic, compiled at the largest size first
(server and max_qps). Inductor's own CUDA graphs (`reduce-overhead`, `max-autotune`) would be
recorded per thread when a shape is first met: here those modes compile as `default` and
`max-autotune-no-cudagraphs` and the lanes capture their own graphs instead.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn as nn
from benchmark_common.accuracy import LabelsError, read_labels
from benchmark_common.datasets import DatasetError, open_dataset
from benchmark_common.harness import EvaluationSetupError, bucket_sizes, run_evaluation
from benchmark_common.predict import predict_images
from benchmark_common.system import ResidentSamples, TopK

from . import distributed
from .cli import Options
from .errors import UserError
from .flops import flops_results
from .models import ModelSpec, get_model_spec, load_model_file
from .runner import (
    _TORCH_DTYPES,
    SetupError,
    build_model,
    configure_torch,
    log,
    memory_format_for,
    peak_memory_mib,
    select_device,
)

#: torch.compile modes whose CUDA graphs are inductor's; the evaluation captures its own.
INDUCTOR_GRAPH_MODES = {"reduce-overhead": "default",
                        "max-autotune": "max-autotune-no-cudagraphs"}


class Forward:
    """One lane's forward pass over prepared batch sizes (see the module doc)."""

    def __init__(self, model: nn.Module, device: torch.device,
                 memory_format: torch.memory_format, graphs: bool,
                 dynamic_batch: bool) -> None:
        self.model = model
        self.device = device
        self.memory_format = memory_format
        self.graphs = graphs
        self.dynamic_batch = dynamic_batch
        self.sizes: list[int] = []
        self.inputs: dict[int, torch.Tensor] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        self.captured: dict[int, Any] = {}
        self.pool = torch.cuda.graph_pool_handle() if graphs else None
        # A capture stream of the lane's own: cuBLAS keeps a workspace per stream, which a
        # graph captures; lanes that shared one would race on it when they run at once.
        self.capture_stream = torch.cuda.Stream(device) if graphs else None
        self.sealed = False
        #: Batches met after `seal` that no prepared size holds (run as they came).
        self.unprepared = 0

    def prepare(self, example: torch.Tensor, sizes: Sequence[int], repeats: int) -> None:
        """Make each batch size's buffer (and graph) from `example`'s rows; run it `repeats` times.

        Largest first: a dynamic-batch graph is compiled at the size that carries the load,
        so that inductor sizes its kernels for it.
        """
        for size in sorted(set(sizes), reverse=True):
            rows = torch.arange(size, device=example.device) % example.shape[0]
            static = example.index_select(0, rows)
            if static.dim() == 4:
                static = static.contiguous(memory_format=self.memory_format)
            if self.dynamic_batch and size > 1:
                torch._dynamo.mark_dynamic(static, 0)
            self.inputs[size] = static
            if self.graphs:
                self._capture(size, static, repeats)
            else:
                with torch.inference_mode():
                    for _ in range(repeats):
                        self.model(static)
        self.sizes = sorted(self.inputs)
        _synchronize(self.device)

    def seal(self) -> None:
        """From now on, a batch no prepared size holds is counted in `unprepared`."""
        self.sealed = True

    def _capture(self, size: int, static_input: torch.Tensor, repeats: int) -> None:
        side = self.capture_stream
        side.wait_stream(torch.cuda.current_stream(self.device))
        # CUDA graphs need their warm-up (and any compilation) on a side stream.
        with torch.inference_mode(), torch.cuda.stream(side):
            for _ in range(max(3, repeats)):
                self.model(static_input)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(graph, pool=self.pool, stream=side):
            self.outputs[size] = self.model(static_input)
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.captured[size] = graph

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        count = batch.shape[0]
        at = bisect.bisect_left(self.sizes, count)
        with torch.inference_mode():
            if at == len(self.sizes):
                if self.sealed:
                    self.unprepared += 1
                return self.model(batch)
            size = self.sizes[at]
            static = self.inputs[size]
            static[:count].copy_(batch)
            if self.graphs:
                self.captured[size].replay()
                return self.outputs[size][:count]
            return self.model(static)[:count]


class _Lane:
    """A lane: its device, its stream (None on the CPU), its forward pass and its event."""

    def __init__(self, index: int, device: torch.device, forward: Forward) -> None:
        self.index = index
        self.device = device
        self.forward = forward
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.done = torch.cuda.Event() if device.type == "cuda" else None


class TorchSystem(ResidentSamples):
    """A PyTorch model on its devices and its samples, for the harness (module doc).

    `models[d]` is the replica on `devices[d]`; `pool[d]` the resident samples there.
    """

    def __init__(self, spec: ModelSpec, opts: Options, devices: Sequence[torch.device],
                 dtype: torch.dtype, models: Sequence[nn.Module], graphs: bool,
                 dynamic_batch: bool) -> None:
        self.spec = spec
        self.devices = list(devices)
        self.dtype = dtype
        self.memory_format = memory_format_for(spec, opts)
        self.graphs = graphs
        self.compiled = opts.compile
        self.title = spec.title
        self.num_classes = spec.num_classes
        self.image_size = spec.input_shape[-1]
        self.lanes = len(self.devices) * opts.evaluation.inference_streams
        self.asynchronous = self.devices[0].type == "cuda"
        self.lane = [_Lane(i % len(self.devices), self.devices[i % len(self.devices)],
                           Forward(models[i % len(self.devices)], self.devices[i % len(devices)],
                                   self.memory_format, graphs, dynamic_batch))
                     for i in range(self.lanes)]
        dataset = None
        if opts.data_dir:
            if not spec.is_image_model:
                raise DatasetError(f"model {spec.model_id} takes input {spec.input_shape}, not "
                                   "images: use synthetic data (no --data_dir)")
            dataset = open_dataset(opts.data_dir, opts.data_backend)
        self.open_samples(dataset, opts.data_dir, opts.evaluation.num_samples, opts.batch_size)

    def _on_devices(self, samples: torch.Tensor) -> list[torch.Tensor]:
        placed = []
        for device in self.devices:
            on_device = samples.to(device=device, dtype=self.dtype)
            if on_device.dim() == 4:
                on_device = on_device.contiguous(memory_format=self.memory_format)
            placed.append(on_device)
            _synchronize(device)  # the lanes read them on streams of their own
        return placed

    # -- the query sample library (the rest is ResidentSamples's) -----------------------------
    def to_device(self, images: np.ndarray) -> list[torch.Tensor]:
        return self._on_devices(torch.from_numpy(images))

    def synthetic(self, count: int) -> list[torch.Tensor]:
        generator = torch.Generator().manual_seed(0)
        return self._on_devices(torch.randn((count, *self.spec.input_shape),
                                            generator=generator))

    # -- the system under test -----------------------------------------------------------
    def batch(self, indices: Sequence[int], device: int = 0) -> torch.Tensor:
        """The resident samples `indices` as one batch on device `device`."""
        assert self.pool is not None, "no samples are loaded"
        pool = self.pool[device]
        if len(indices) == 1:
            row = self.rows[indices[0]]
            return pool[row:row + 1]
        rows = torch.tensor([self.rows[index] for index in indices], dtype=torch.long)
        return pool.index_select(0, rows.to(pool.device, non_blocking=True))

    def submit(self, indices: Sequence[int], top: int = 0,
               lane: int = 0) -> Callable[[], TopK | None]:
        """Start a batch on the lane's stream and return at once (the CPU: compute it here).

        The top classes are computed on the device right after the forward pass, in the
        lane's stream order, so a CUDA graph's static output may be overwritten by the
        lane's next batch.
        """
        on = self.lane[lane]
        if on.stream is None:
            output = on.forward(self.batch(indices, on.index))
            answer = top_classes(output, top) if top else None
            return lambda: answer
        with torch.cuda.device(on.device), torch.cuda.stream(on.stream):
            output = on.forward(self.batch(indices, on.index))
            best = device_top_classes(output, top) if top else None
            on.done.record(on.stream)

        def wait() -> TopK | None:
            on.done.synchronize()
            if best is None:
                return None
            classes, chances = best
            return classes.cpu().numpy(), chances.cpu().numpy()

        return wait

    def prepare(self, batch_sizes: Sequence[int], repeats: int,
                resident: Sequence[int]) -> None:
        for on in self.lane:
            if on.stream is None:
                on.forward.prepare(self.batch(list(resident), on.index), batch_sizes, repeats)
                continue
            _synchronize(on.device)
            with torch.cuda.device(on.device), torch.cuda.stream(on.stream):
                on.forward.prepare(self.batch(list(resident), on.index), batch_sizes, repeats)
        for on in self.lane:
            on.forward.seal()

    def compilations(self) -> int:
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"] if self.compiled else 0
        return int(graphs) + sum(on.forward.unprepared for on in self.lane)

    def bind_thread(self, lane: int) -> None:
        on = self.lane[lane]
        if on.stream is not None:
            torch.cuda.set_device(on.device)  # the current device is per thread


def device_top_classes(output: torch.Tensor, top: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The `top` best classes and their softmax probabilities, where the output is."""
    probabilities = torch.softmax(output.float(), dim=1)
    chances, classes = probabilities.topk(min(top, probabilities.shape[1]), dim=1)
    return classes, chances


def top_classes(output: torch.Tensor, top: int) -> TopK:
    """The `top` best classes and their softmax probabilities, as numpy arrays."""
    classes, chances = device_top_classes(output, top)
    return classes.cpu().numpy(), chances.cpu().numpy()


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _compiled(model: nn.Module, opts: Options, dynamic_batch: bool) -> nn.Module:
    """torch.compile for the evaluation: CUDA graphs are the lanes', not inductor's.

    `dynamic_batch`: one graph whose batch is dynamic for the scenarios that prepare several
    sizes (each would otherwise be compiled on its own), else static shapes.
    """
    mode = INDUCTOR_GRAPH_MODES.get(opts.compile_mode, opts.compile_mode)
    if getattr(opts, "freezing", False):
        import torch._inductor.config as inductor_config

        inductor_config.freezing = True  # inference: the weights never change
    # Every prepared size of every replica is a guard of its own: let dynamo keep them all.
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(64, getattr(torch._dynamo.config, name)))
    return torch.compile(model, mode=mode, dynamic=None if dynamic_batch else False)


def evaluation_devices(opts: Options, topology: distributed.Topology) -> list[torch.device]:
    """The CPU, or the `--num_gpus` CUDA devices this process sees (one process for all)."""
    first = select_device(opts, topology)
    if first.type != "cuda" or opts.num_gpus <= 1:
        return [first]
    count = torch.cuda.device_count()
    if opts.num_gpus > count:
        raise SetupError(f"--num_gpus {opts.num_gpus}, but torch sees {count} CUDA device(s)")
    return [torch.device("cuda", index) for index in range(opts.num_gpus)]


def uses_graphs(opts: Options, devices: Sequence[torch.device]) -> bool:
    """Whether the lanes capture CUDA graphs (`--cuda_graphs`, or an inductor graph mode)."""
    asked = opts.cuda_graphs or (opts.compile and opts.compile_mode in INDUCTOR_GRAPH_MODES)
    return asked and devices[0].type == "cuda"


def build_system(opts: Options, devices: Sequence[torch.device]) -> TorchSystem:
    """The model (a replica on each device, compiled as the scenario needs) and its samples.

    The tests give several CPU devices, standing in for GPUs.
    """
    spec = get_model_spec(opts.model, opts.num_classes)
    dtype = _TORCH_DTYPES[opts.dtype]
    torch.manual_seed(0)
    memory_format = memory_format_for(spec, opts)
    first = build_model(spec, opts, devices[0], dtype, memory_format)
    # The same weights on every device (random ones included).
    models = [first] + [copy.deepcopy(first).to(device) for device in devices[1:]]
    dynamic_batch = opts.evaluation.scenario in ("server", "max_qps") and \
        len(bucket_sizes(opts.batch_size)) > 2
    if opts.compile:
        models = [_compiled(model, opts, dynamic_batch) for model in models]
    graphs = uses_graphs(opts, devices)
    log(f"evaluation: model={spec.model_id} scenario={opts.evaluation.scenario} "
        f"devices={','.join(str(device) for device in devices)} dtype={opts.dtype} "
        f"batch={opts.batch_size} streams={opts.evaluation.inference_streams} "
        f"max_queue_delay_ms={opts.evaluation.max_queue_delay_ms:g} "
        f"channels_last={opts.channels_last} compile={opts.compile} "
        f"dynamic_batch={dynamic_batch and opts.compile} cuda_graphs={graphs} "
        f"weights={opts.evaluation.weights or '(random)'} torch={torch.__version__}")
    return TorchSystem(spec, opts, devices, dtype, models, graphs, dynamic_batch)


def evaluate(opts: Options, topology: distributed.Topology,
             abort: Callable[[BaseException], None]) -> dict[str, Any]:
    """Run the evaluation the flags ask for; return the results to print."""
    evaluation = opts.evaluation
    if topology.world_size > 1:
        raise SetupError(f"--scenario {evaluation.scenario} and --predict run one process "
                         f"(WORLD_SIZE is {topology.world_size}); it serves every GPU of "
                         "--num_gpus itself")
    if opts.extra_models:
        load_model_file(opts.extra_models)
    spec = get_model_spec(opts.model, opts.num_classes)
    if spec.sequence is not None:
        raise SetupError(f"--scenario and --predict evaluate image and feature models; "
                         f"{spec.model_id} is a transformer (benchmark its training or "
                         f"inference with --forward_only)")
    if evaluation.scenario == "accuracy" and not opts.data_dir:
        raise SetupError("--scenario accuracy needs a dataset (--data_dir)")
    devices = evaluation_devices(opts, topology)
    configure_torch(opts, devices[0])
    results: dict[str, Any] = {"exp.model_title": spec.title,
                               "exp.framework_ver": torch.__version__}
    try:
        if evaluation.predict:
            _predict(spec, opts, devices[0])
        else:
            system = build_system(opts, devices)
            results.update(run_evaluation(system, evaluation, batch_size=opts.batch_size,
                                          warmup=opts.num_warmup_batches, say=log,
                                          abort=abort))
    except (DatasetError, EvaluationSetupError, LabelsError) as error:
        raise UserError(str(error)) from None
    results["results.mem_peak"] = max(peak_memory_mib(device) for device in devices)
    results.update(flops_results(spec.model_id, spec.input_shape, False, devices[0]))
    return results


def _predict(spec: ModelSpec, opts: Options, device: torch.device) -> None:
    from benchmark_common.protocol import emit

    if not spec.is_image_model:
        raise UserError(f"--predict classifies images; model {spec.model_id} takes input "
                        f"{spec.input_shape}")
    names = read_labels(opts.evaluation.labels, spec.num_classes) \
        if opts.evaluation.labels else None
    dtype = _TORCH_DTYPES[opts.dtype]
    memory_format = memory_format_for(spec, opts)
    torch.manual_seed(0)
    model = build_model(spec, opts, device, dtype, memory_format)
    if opts.compile:
        model = _compiled(model, opts, dynamic_batch=False)

    def classify(batch: np.ndarray, top: int) -> TopK:
        inputs = torch.from_numpy(batch).to(device=device, dtype=dtype)
        with torch.inference_mode():
            return top_classes(model(inputs.contiguous(memory_format=memory_format)), top)

    failed = predict_images(opts.evaluation.predict, spec.input_shape[-1], classify,
                            opts.evaluation.top, names, emit)
    if failed:
        log(f"{failed} of {len(opts.evaluation.predict)} images could not be classified")
