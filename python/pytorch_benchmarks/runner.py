"""Build the experiment from the options, run it, and return what rank 0 reports."""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.nn as nn
from benchmark_common.memory import peak_rss_mib
from benchmark_common.protocol import emit, time_statistics
from benchmark_common.timed_marks import TimedMarks

from . import distributed
from .cli import Options
from .data.device_jpeg import DeviceJpegSource
from .data.sources import LoaderSource, SyntheticSource, make_loader_source
from .errors import UserError
from .flops import flops_results, gpu_model_result
from .models import ModelSpec, get_model_spec, load_model_file
from .optimizers import make_optimizer
from .sequence import (
    TokenSource,
    build_inference_model,
    build_training_module,
    sequence_length,
    sequence_results,
)
from .steps import (
    Step,
    make_cuda_graph_step,
    make_graphed_training_step,
    make_inference_step,
    make_training_step,
)
from .timing import device_synchronizer, run_event_timed_loop, run_timed_loop
from .tracing import Tracer, eager_model, in_phase, make_tracer
from .weights import load_weights

_TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class SetupError(UserError):
    """An experiment this machine or this build of torch cannot run, said plainly."""


def log(message: str) -> None:
    """An informational line (not a protocol key)."""
    print(f"[pytorch_benchmarks] {message}", flush=True)


def select_device(opts: Options, topology: distributed.Topology) -> torch.device:
    """cpu, or the CUDA device of this process's local rank."""
    if opts.device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SetupError("--device gpu, but torch sees no CUDA device (use --device cpu)")
    count = torch.cuda.device_count()
    if topology.local_rank < count:
        index = topology.local_rank
    elif count == 1:
        index = 0  # the launcher bound one GPU to this process (srun --gpu-bind, say)
    else:
        raise SetupError(
            f"LOCAL_RANK={topology.local_rank}, but only {count} CUDA devices are visible"
        )
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def configure_torch(opts: Options, device: torch.device) -> None:
    """Threads, cuDNN autotuning and TF32, as the flags say."""
    if opts.num_threads:
        torch.set_num_threads(opts.num_threads)
    # TF32: 'high' lets float32 matmuls use TF32 tensor cores; cuDNN has its own switch.
    torch.set_float32_matmul_precision("high" if opts.tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = opts.tf32
    # cudnn.fastest (Lua Torch, old PyTorch) picked the fastest algorithm regardless of
    # workspace; today's nearest control is an exhaustive autotuner search.
    torch.backends.cudnn.benchmark = opts.cudnn_benchmark or opts.cudnn_fastest
    if opts.cudnn_fastest:
        torch.backends.cudnn.benchmark_limit = 0


def uses_channels_last(spec: ModelSpec, opts: Options) -> bool:
    """Whether the model and its input are channels-last: --channels_last, auto resolved.

    auto is true for models of image input (4-D batches: the convolutional ones) on a GPU,
    where cuDNN's and inductor's NHWC kernels are the fast ones, and false on the CPU. A
    model without image input never changes layout.
    """
    if len(spec.input_shape) != 3:
        return False
    if opts.channels_last == "auto":
        return opts.device == "gpu"
    return bool(opts.channels_last)


def memory_format_for(spec: ModelSpec, opts: Options) -> torch.memory_format:
    """channels-last (NHWC) where ``uses_channels_last``, else the default layout."""
    return torch.channels_last if uses_channels_last(spec, opts) else torch.contiguous_format


def build_model(
    spec: ModelSpec,
    opts: Options,
    device: torch.device,
    dtype: torch.dtype,
    memory_format: torch.memory_format,
) -> nn.Module:
    """The model on the device, in train or eval mode; inference models cast to ``dtype``.

    With ``--weights`` the model starts from them, else from its random initialisation.
    """
    model = spec.build()
    if opts.evaluation.weights:
        load_weights(model, opts.evaluation.weights, spec.model_id)
    model = model.to(device=device, memory_format=memory_format)
    if opts.forward_only:
        # Inference in half precision runs a half model (as inference engines do): autocast
        # would re-cast every weight on every batch.
        model = model.to(dtype).eval()
        for parameter in model.parameters():
            parameter.requires_grad_(False)
    else:
        model.train()
    return model


def wrap_ddp(model: nn.Module, opts: Options, device: torch.device) -> nn.Module:
    """DistributedDataParallel with the options that keep the step free of extra traffic."""
    from torch.nn.parallel import DistributedDataParallel

    # Newer torch renames broadcast_buffers (and warns on the old name).
    buffers_flag = (
        "forward_sync_buffers"
        if "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
        else "broadcast_buffers"
    )
    ddp = DistributedDataParallel(
        model,
        device_ids=[device.index] if device.type == "cuda" else None,
        bucket_cap_mb=opts.ddp_bucket_cap_mb,
        gradient_as_bucket_view=True,
        static_graph=opts.ddp_static_graph,
        **{buffers_flag: opts.ddp_broadcast_buffers},
    )
    if opts.ddp_comm_hook != "none":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        hook = {"fp16": default_hooks.fp16_compress_hook, "bf16": default_hooks.bf16_compress_hook}
        ddp.register_comm_hook(None, hook[opts.ddp_comm_hook])
    return ddp


def compile_mode(opts: Options) -> str:
    """torch.compile's mode.

    Inference with CUDA graphs: inductor's own (reduce-overhead, max-autotune). Training with
    CUDA graphs: the backend captures the whole step itself (make_graphed_training_step), so
    the compiled model must not capture its own (default, max-autotune-no-cudagraphs).
    """
    if opts.cuda_graphs and not opts.forward_only:
        return {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}.get(
            opts.compile_mode, opts.compile_mode)
    if opts.cuda_graphs and opts.compile_mode in ("default", "max-autotune-no-cudagraphs"):
        return "reduce-overhead" if opts.compile_mode == "default" else "max-autotune"
    return opts.compile_mode


def compile_options(opts: Options) -> dict[str, Any]:
    """torch.compile's inductor options: its mode's, then --inductor_options over them."""
    from torch._inductor import config as inductor_config
    from torch._inductor import list_mode_options

    options = dict(list_mode_options(compile_mode(opts)))
    known = inductor_config.get_config_copy()
    for name, value in opts.inductor_options:
        if name not in known:
            raise SetupError(f"--inductor_options {name}: torch {torch.__version__} has no "
                             "such torch._inductor.config setting")
        options[name] = value
    if opts.cuda_graphs and not opts.forward_only and options.get("triton.cudagraphs"):
        raise SetupError("--inductor_options triton.cudagraphs=true: the training step is "
                         "captured whole with --cuda_graphs; inductor may not capture its own")
    return options


def make_source(
    spec: ModelSpec,
    opts: Options,
    device: torch.device,
    dtype: torch.dtype,
    memory_format: torch.memory_format,
    topology: distributed.Topology,
) -> SyntheticSource | LoaderSource | DeviceJpegSource | TokenSource:
    """Synthetic data (empty --data_dir) or a real dataset; token ids for a transformer."""
    if spec.sequence is not None:
        return TokenSource(spec, opts.batch_size, sequence_length(spec, opts.seq_len), device)
    # Training keeps float32 inputs (autocast casts them); inference feeds the model's dtype.
    input_dtype = dtype if opts.forward_only else torch.float32
    if not opts.data_dir:
        return SyntheticSource(
            spec, opts.batch_size, device, input_dtype, memory_format, opts.synthetic_data_location
        )
    return make_loader_source(
        spec,
        data_dir=opts.data_dir,
        backend=opts.data_backend,
        training=not opts.forward_only,
        batch_size=opts.batch_size,
        shuffle=opts.data_shuffle,
        num_workers=opts.num_loader_threads,
        device=device,
        dtype=input_dtype,
        memory_format=memory_format,
        world_size=topology.world_size,
        rank=topology.rank,
        decode=opts.decode,
    )


def make_step(
    spec: ModelSpec,
    opts: Options,
    device: torch.device,
    dtype: torch.dtype,
    source: SyntheticSource | LoaderSource | DeviceJpegSource,
    memory_format: torch.memory_format,
    topology: distributed.Topology,
    tracer: Tracer | None = None,
) -> Step:
    """The step the loop times, with DDP, compilation and CUDA graphs as asked.

    A ``tracer`` gets the same step with phase spans, and the eager model (tracing.py).
    """
    if opts.data_loader_only:
        return lambda inputs, labels: None
    if spec.sequence is not None:
        return make_sequence_step(spec, opts, device, dtype, topology, tracer)
    model = build_model(spec, opts, device, dtype, memory_format)
    graphed_training = opts.cuda_graphs and not opts.forward_only
    if topology.distributed and not opts.forward_only:
        if graphed_training:
            # torch's rule for capturing DDP's backward: build it on a side stream.
            with torch.cuda.stream(torch.cuda.Stream(device)):
                model = wrap_ddp(model, opts, device)
        else:
            model = wrap_ddp(model, opts, device)
    train_module = model
    if opts.compile:
        if topology.distributed and not opts.forward_only:
            torch._dynamo.config.optimize_ddp = opts.compile_ddp == "split"
        if opts.freezing:
            import torch._inductor.config as inductor_config

            # Inference only (checked in cli.py): the weights never change, so inductor may
            # fold them into the graph as constants and lay them out for its kernels.
            inductor_config.freezing = True
        model = torch.compile(model, options=compile_options(opts))
    eager = eager_model(train_module, opts.compile or opts.cuda_graphs)
    if opts.forward_only:
        if opts.cuda_graphs and not opts.compile:
            example, _ = source.next()
            step = make_cuda_graph_step(model, example)
        else:
            step = make_inference_step(model)
        if tracer is not None:
            tracer.attach(eager, in_phase(step, "forward", tracer))
        return step
    optimizer = make_optimizer(train_module, opts.optimizer, opts.optimizer_impl, opts.lr)
    if tracer is not None:
        tracer.attach(eager, make_training_step(model, optimizer, device, dtype, tracer.phase))
    if not graphed_training:
        return make_training_step(model, optimizer, device, dtype)
    step = make_training_step(model, optimizer, device, dtype, autocast_cache=False)
    inputs, labels = static_batch(spec, opts, source, device, memory_format)
    # DDP's reducer settles its buckets over its first iterations: torch asks for 11 before
    # capturing its backward.
    return make_graphed_training_step(step, inputs, labels,
                                      warmup=11 if topology.distributed else 3)


def data_parallel(spec: ModelSpec, opts: Options, topology: distributed.Topology) -> str | None:
    """How several replicas train: fsdp or ddp (--data_parallel, auto resolved); None alone."""
    if not topology.distributed:
        return None
    if opts.data_parallel == "auto":
        return "fsdp" if spec.sequence is not None else "ddp"
    return opts.data_parallel


def check_sequence_options(spec: ModelSpec, opts: Options) -> None:
    """Refuse the options that do not apply to this kind of model, in one line each."""
    if spec.sequence is None:
        for flag, given in (("--seq_len", opts.seq_len),
                            ("--activation_checkpointing", opts.activation_checkpointing != "none"),
                            ("--data_parallel fsdp", opts.data_parallel == "fsdp")):
            if given:
                raise SetupError(f"{flag} applies to transformers (bert_*, gpt2*, llama3_*); "
                                 f"{spec.model_id} is not one")
        return
    for flag, given in (("--data_dir", opts.data_dir), ("--cuda_graphs", opts.cuda_graphs),
                        ("--data_loader_only", opts.data_loader_only)):
        if given:
            raise SetupError(f"{flag}: {spec.model_id} trains on synthetic token ids, "
                             "step by step (no datasets or CUDA graphs for transformers)")
    if opts.dtype == "float16" and opts.data_parallel != "ddp" and not opts.forward_only and \
            opts.num_gpus > 1:
        raise SetupError("--dtype float16 with FSDP2 would need a sharded loss scaler: use "
                         "bfloat16, or --data_parallel ddp")
    sequence_length(spec, opts.seq_len)


def make_sequence_step(
    spec: ModelSpec,
    opts: Options,
    device: torch.device,
    dtype: torch.dtype,
    topology: distributed.Topology,
    tracer: Tracer | None = None,
) -> Step:
    """A transformer's step: per-block compile, checkpointing and FSDP2 or DDP (sequence.py)."""
    options = compile_options(opts) if opts.compile else None
    if opts.forward_only:
        model = build_inference_model(spec, device, dtype, options)
        step = make_inference_step(model)
        if tracer is not None:
            tracer.attach(eager_model(model, opts.compile), in_phase(step, "forward", tracer))
        return step
    parallel = data_parallel(spec, opts, topology)
    module: nn.Module = build_training_module(spec, device, dtype, opts.activation_checkpointing,
                                              options, parallel)
    if parallel == "ddp":
        module = wrap_ddp(module, opts, device)
    optimizer = make_optimizer(module, opts.optimizer, opts.optimizer_impl, opts.lr)
    # FSDP2 casts the weights itself (its mixed-precision policy): no autocast over it.
    autocast_dtype = torch.float32 if parallel == "fsdp" else dtype

    def loss_of(train_module: nn.Module, tokens: torch.Tensor, targets: Any) -> torch.Tensor:
        return train_module(tokens, targets)

    if tracer is not None:
        tracer.attach(eager_model(module, opts.compile),
                      make_training_step(module, optimizer, device, autocast_dtype,
                                         tracer.phase, loss_of=loss_of))
    return make_training_step(module, optimizer, device, autocast_dtype, loss_of=loss_of)


def static_batch(
    spec: ModelSpec,
    opts: Options,
    source: SyntheticSource | LoaderSource | DeviceJpegSource,
    device: torch.device,
    memory_format: torch.memory_format,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The input buffers a captured step reads.

    The synthetic batch itself (no copy per step), else zeros of the batch's shape that each
    step's batch is copied into.
    """
    if isinstance(source, SyntheticSource) and not source.from_host:
        return source.inputs, source.labels
    inputs = torch.zeros((opts.batch_size, *spec.input_shape), device=device)
    if inputs.dim() == 4:
        inputs = inputs.contiguous(memory_format=memory_format)
    labels = torch.zeros((opts.batch_size,), dtype=torch.long, device=device)
    return inputs, labels


def peak_memory_mib(device: torch.device) -> float:
    """Peak device memory the caching allocator took (GPU), or the peak host RSS (CPU)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_reserved(device) / 2**20
    return peak_rss_mib()


def run_benchmark(opts: Options, topology: distributed.Topology) -> dict[str, Any] | None:
    """Run the experiment; return the protocol's results on rank 0, None on other ranks."""
    if opts.extra_models:
        load_model_file(opts.extra_models)
    spec = get_model_spec(opts.model, opts.num_classes)
    check_sequence_options(spec, opts)
    dtype = _TORCH_DTYPES[opts.dtype]
    device = select_device(opts, topology)
    configure_torch(opts, device)
    if opts.device == "gpu" and topology.world_size == 1 and opts.num_gpus > 1:
        raise SetupError(f"--num_gpus {opts.num_gpus} needs one process per GPU (torchrun)")
    distributed.init_process_group(topology, device)
    if topology.distributed and opts.forward_only:
        log("inference on several replicas: each runs its own batches, no communication")
    torch.manual_seed(0)
    memory_format = memory_format_for(spec, opts)
    source = make_source(spec, opts, device, dtype, memory_format, topology)
    try:  # a decoding thread or loader workers stop whatever happens
        tracer = make_tracer(opts, spec.model_id, spec.title, device, topology.is_main,
                             topology.world_size)
        step = make_step(spec, opts, device, dtype, source, memory_format, topology, tracer)
        log(
            f"model={spec.model_id} phase={opts.phase} device={device} dtype={opts.dtype} "
            f"batch={opts.batch_size}x{topology.world_size} "
            f"channels_last={uses_channels_last(spec, opts)} "
            f"compile={opts.compile}({compile_mode(opts) if opts.compile else '-'}) "
            f"inductor_options={dict(opts.inductor_options)} freezing={opts.freezing} "
            f"cuda_graphs={opts.cuda_graphs} optimizer={opts.optimizer}({opts.optimizer_impl}) "
            f"data={'synthetic' if not opts.data_dir else opts.data_backend} "
            f"decode={opts.decode} data_loader_only={opts.data_loader_only} "
            f"float32_matmul_precision={torch.get_float32_matmul_precision()} "
            f"cudnn_tf32={torch.backends.cudnn.allow_tf32} torch={torch.__version__}"
            + (f" seq_len={sequence_length(spec, opts.seq_len)} "
               f"activation_checkpointing={opts.activation_checkpointing} "
               f"data_parallel={data_parallel(spec, opts, topology)}"
               if spec.sequence is not None else "")
        )
        marks = TimedMarks(emit, enabled=topology.is_main)
        if opts.timing == "events" and device.type == "cuda":
            timings = run_event_timed_loop(
                source.next, step, device, opts.num_warmup_batches, opts.num_batches, marks
            )
        else:
            timings = run_timed_loop(
                source.next,
                step,
                device_synchronizer(device),
                opts.num_warmup_batches,
                opts.num_batches,
                marks,
            )
        memory = peak_memory_mib(device)  # before the traced pass, which never counts
        traced = tracer.run(source.next, step) if tracer is not None else {}
    finally:
        source.close()
    # The slowest replica sets the job's pace: take each batch's maximum over replicas.
    batch_ms = distributed.all_reduce_max(timings.batch_ms, device)
    warmup_ms = distributed.all_reduce_max(timings.warmup_ms, device)
    wait_ms = distributed.all_reduce_max(timings.data_wait_ms, device)
    memory = distributed.all_reduce_max([memory], device)[0]
    if not topology.is_main:
        return None
    results: dict[str, Any] = time_statistics(batch_ms)
    effective_batch = opts.batch_size * topology.world_size
    results["results.throughput"] = effective_batch * 1000.0 / results["results.time"]
    results["results.time_data"] = batch_ms
    results["results.warmup_time_data"] = warmup_ms
    if opts.data_dir:
        results["results.time_data_wait"] = sum(wait_ms) / len(wait_ms)
        # The share of the timed wall time spent waiting for input (0 to 1).
        results["results.data_wait"] = sum(wait_ms) / sum(batch_ms)
    results["results.mem_peak"] = memory
    if spec.sequence is not None:
        results.update(gpu_model_result(device))
        results.update(sequence_results(spec, sequence_length(spec, opts.seq_len),
                                        not opts.forward_only, results["results.throughput"],
                                        topology.world_size, device.type == "cuda"))
    elif not opts.data_loader_only:
        results.update(flops_results(spec.model_id, spec.input_shape, not opts.forward_only,
                                     device))
    results["exp.model_title"] = spec.title
    results["exp.framework_ver"] = torch.__version__
    results.update(traced)
    return results
