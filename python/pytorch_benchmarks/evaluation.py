"""Inference evaluation with PyTorch: the model as LoadGen's system under test.

`evaluate(opts, topology, abort)` runs `--scenario` (through `benchmark_common.harness`) or
`--predict`, and returns the protocol's results. The samples are synthetic (distinct random
samples, class i % classes) or the first samples of `--data_dir`, preprocessed once
(`benchmark_common.preprocess`) and kept on the device in the model's dtype and memory
format while LoadGen has them loaded. See docs/evaluation.md.

Static shapes: with `--compile` or `--cuda_graphs` the model runs only the batch sizes the
scenario prepared (each run, and captured in a CUDA graph of its own, during the warm-up;
server and max_qps compile one graph with a dynamic batch, the others one per size); a smaller
batch is padded up to the next prepared size and the padding's outputs are dropped. Eager
models run every batch as it comes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch._dynamo
import torch.nn as nn
from benchmark_common.accuracy import LabelsError, read_labels
from benchmark_common.datasets import DatasetError, open_dataset
from benchmark_common.harness import EvaluationSetupError, run_evaluation
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


class Forward:
    """The model's forward pass over a batch, with static shapes when compiled or graphed."""

    def __init__(self, model: nn.Module, opts: Options, device: torch.device) -> None:
        self.model = model
        self.device = device
        self.graphs = opts.cuda_graphs and device.type == "cuda"
        self.static = self.graphs or opts.compile
        self.sizes: list[int] = []
        self.padded: dict[int, torch.Tensor] = {}
        self.captured: dict[int, tuple[torch.Tensor, torch.Tensor, Any]] = {}
        self.pool = torch.cuda.graph_pool_handle() if self.graphs else None

    def prepare(self, example: torch.Tensor, sizes: Sequence[int], repeats: int) -> None:
        """Compile (or capture) and run each batch size `repeats` times, from `example` rows."""
        for size in sorted(set(sizes)):
            rows = torch.arange(size, device=example.device) % example.shape[0]
            batch = example.index_select(0, rows).contiguous(
                memory_format=_format_of(example))
            if self.graphs and size not in self.captured:
                self._capture(size, batch, repeats)
            else:
                for _ in range(repeats):
                    self(batch)
            if size not in self.sizes:
                self.sizes = sorted({*self.sizes, size})
        _synchronize(self.device)

    def _capture(self, size: int, batch: torch.Tensor, repeats: int) -> None:
        static_input = batch.clone(memory_format=_format_of(batch))
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        # CUDA graphs need their warm-up (and any compilation) on a side stream.
        with torch.inference_mode(), torch.cuda.stream(side):
            for _ in range(max(3, repeats)):
                self.model(static_input)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(graph, pool=self.pool):
            static_output = self.model(static_input)
        self.captured[size] = (static_input, static_output, graph)

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        count = batch.shape[0]
        size = next((s for s in self.sizes if s >= count), None) if self.static else None
        with torch.inference_mode():
            if size is None:
                return self.model(batch)
            if self.graphs:
                static_input, static_output, graph = self.captured[size]
                static_input[:count].copy_(batch)
                graph.replay()
                return static_output[:count]
            if count == size:
                return self.model(batch)
            padded = self.padded.get(size)
            if padded is None:
                padded = self.padded[size] = torch.zeros(
                    (size, *batch.shape[1:]), dtype=batch.dtype, device=batch.device
                ).contiguous(memory_format=_format_of(batch))
            padded[:count].copy_(batch)
            return self.model(padded)[:count]


class TorchSystem(ResidentSamples):
    """A PyTorch model and its samples, for the harness (benchmark_common.system)."""

    def __init__(self, spec: ModelSpec, opts: Options, device: torch.device,
                 dtype: torch.dtype, forward: Forward) -> None:
        self.spec = spec
        self.device = device
        self.dtype = dtype
        self.memory_format = memory_format_for(spec, opts)
        self.forward = forward
        self.title = spec.title
        self.num_classes = spec.num_classes
        self.image_size = spec.input_shape[-1]
        dataset = None
        if opts.data_dir:
            if not spec.is_image_model:
                raise DatasetError(f"model {spec.model_id} takes input {spec.input_shape}, not "
                                   "images: use synthetic data (no --data_dir)")
            dataset = open_dataset(opts.data_dir, opts.data_backend)
        self.open_samples(dataset, opts.data_dir, opts.evaluation.num_samples, opts.batch_size)

    def _on_device(self, samples: torch.Tensor) -> torch.Tensor:
        samples = samples.to(device=self.device, dtype=self.dtype)
        if samples.dim() == 4:
            samples = samples.contiguous(memory_format=self.memory_format)
        return samples

    # -- the query sample library (the rest is ResidentSamples's) -----------------------------
    def to_device(self, images: np.ndarray) -> torch.Tensor:
        return self._on_device(torch.from_numpy(images))

    def synthetic(self, count: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(0)
        return self._on_device(torch.randn((count, *self.spec.input_shape), generator=generator))

    # -- the system under test -----------------------------------------------------------
    def batch(self, indices: Sequence[int]) -> torch.Tensor:
        """The resident samples `indices` as one batch on the device."""
        assert self.pool is not None, "no samples are loaded"
        if len(indices) == 1:
            row = self.rows[indices[0]]
            return self.pool[row:row + 1]
        rows = torch.tensor([self.rows[index] for index in indices], dtype=torch.long)
        return self.pool.index_select(0, rows.to(self.device, non_blocking=True)).contiguous(
            memory_format=self.memory_format if self.pool.dim() == 4 else
            torch.contiguous_format)

    def infer(self, indices: Sequence[int], top: int = 0) -> TopK | None:
        output = self.forward(self.batch(indices))
        if top:
            return top_classes(output, top)
        _synchronize(self.device)
        return None

    def submit(self, indices: Sequence[int], top: int = 0) -> Callable[[], TopK | None]:
        """Start a batch on the GPU and return at once; see `InferenceSystem.submit`.

        The top classes are computed on the device right after the forward pass, in stream
        order, so a CUDA graph's static output may be overwritten by the next batch.
        """
        if self.device.type != "cuda":
            return super().submit(indices, top)
        output = self.forward(self.batch(indices))
        best = device_top_classes(output, top) if top else None
        done = torch.cuda.Event()
        done.record(torch.cuda.current_stream(self.device))

        def wait() -> TopK | None:
            done.synchronize()
            if best is None:
                return None
            classes, chances = best
            return classes.cpu().numpy(), chances.cpu().numpy()

        return wait

    def warm_up(self, batch_sizes: Sequence[int], repeats: int) -> None:
        assert self.pool is not None
        example = self.batch(sorted(self.rows)[:max(batch_sizes)])
        self.forward.prepare(example, batch_sizes, repeats)

    def bind_thread(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # the current device is per thread


def device_top_classes(output: torch.Tensor, top: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The `top` best classes and their softmax probabilities, where the output is."""
    probabilities = torch.softmax(output.float(), dim=1)
    chances, classes = probabilities.topk(min(top, probabilities.shape[1]), dim=1)
    return classes, chances


def top_classes(output: torch.Tensor, top: int) -> TopK:
    """The `top` best classes and their softmax probabilities, as numpy arrays."""
    classes, chances = device_top_classes(output, top)
    return classes.cpu().numpy(), chances.cpu().numpy()


def _format_of(batch: torch.Tensor) -> torch.memory_format:
    if batch.dim() == 4 and batch.is_contiguous(memory_format=torch.channels_last) and \
            not batch.is_contiguous():
        return torch.channels_last
    return torch.contiguous_format


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _compiled(model: nn.Module, opts: Options, dynamic: bool) -> nn.Module:
    """torch.compile; CUDA graphs are captured here, not by inductor.

    `dynamic`: one graph for every batch size (server and max_qps prepare up to ten of
    them, each of which would otherwise be compiled on its own), else one graph per size.
    """
    mode = opts.compile_mode
    if opts.cuda_graphs:
        mode = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}.get(
            mode, mode)
    if getattr(opts, "freezing", False):
        import torch._inductor.config as inductor_config

        inductor_config.freezing = True  # inference: the weights never change
    # Each prepared batch size is a shape of its own: let dynamo keep them all.
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(64, getattr(torch._dynamo.config, name)))
    return torch.compile(model, mode=mode, dynamic=dynamic)


def evaluate(opts: Options, topology: distributed.Topology,
             abort: Callable[[BaseException], None]) -> dict[str, Any]:
    """Run the evaluation the flags ask for; return the results to print."""
    evaluation = opts.evaluation
    if topology.world_size > 1:
        raise SetupError(f"--scenario {evaluation.scenario} and --predict run one process "
                         f"(WORLD_SIZE is {topology.world_size})")
    if opts.extra_models:
        load_model_file(opts.extra_models)
    spec = get_model_spec(opts.model)
    if evaluation.scenario == "accuracy" and not opts.data_dir:
        raise SetupError("--scenario accuracy needs a dataset (--data_dir)")
    dtype = _TORCH_DTYPES[opts.dtype]
    device = select_device(opts, topology)
    configure_torch(opts, device)
    torch.manual_seed(0)
    memory_format = memory_format_for(spec, opts)
    model = build_model(spec, opts, device, dtype, memory_format)
    if opts.compile:
        model = _compiled(model, opts, dynamic=evaluation.scenario in ("server", "max_qps"))
    forward = Forward(model, opts, device)
    log(f"evaluation: model={spec.model_id} scenario={evaluation.scenario or 'predict'} "
        f"device={device} dtype={opts.dtype} batch={opts.batch_size} "
        f"channels_last={opts.channels_last} compile={opts.compile} "
        f"cuda_graphs={opts.cuda_graphs} weights={evaluation.weights or '(random)'} "
        f"torch={torch.__version__}")
    results: dict[str, Any] = {"exp.model_title": spec.title,
                               "exp.framework_ver": torch.__version__}
    try:
        if evaluation.predict:
            _predict(spec, opts, device, dtype, memory_format, forward)
        else:
            system = TorchSystem(spec, opts, device, dtype, forward)
            results.update(run_evaluation(system, evaluation, batch_size=opts.batch_size,
                                          warmup=opts.num_warmup_batches, say=log,
                                          abort=abort))
    except (DatasetError, EvaluationSetupError, LabelsError) as error:
        raise UserError(str(error)) from None
    results["results.mem_peak"] = peak_memory_mib(device)
    results.update(flops_results(spec.model_id, spec.input_shape, False, device))
    return results


def _predict(spec: ModelSpec, opts: Options, device: torch.device, dtype: torch.dtype,
             memory_format: torch.memory_format, forward: Forward) -> None:
    from benchmark_common.protocol import emit

    if not spec.is_image_model:
        raise UserError(f"--predict classifies images; model {spec.model_id} takes input "
                        f"{spec.input_shape}")
    names = read_labels(opts.evaluation.labels, spec.num_classes) \
        if opts.evaluation.labels else None

    def classify(batch: np.ndarray, top: int) -> TopK:
        inputs = torch.from_numpy(batch).to(device=device, dtype=dtype)
        return top_classes(forward(inputs.contiguous(memory_format=memory_format)), top)

    failed = predict_images(opts.evaluation.predict, spec.input_shape[-1], classify,
                            opts.evaluation.top, names, emit)
    if failed:
        log(f"{failed} of {len(opts.evaluation.predict)} images could not be classified")
