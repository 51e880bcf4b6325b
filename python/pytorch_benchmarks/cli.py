"""The backend's command line: docs/backends/protocol.md section 1 plus PyTorch speed options."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass

from benchmark_common.flags import (
    FlagError,
    FlagParser,
    ProtocolOptions,
    add_bool_flag,
    add_num_classes_flag,
    parse_auto_bool,
    parse_bool,
    parse_dtype,
)
from benchmark_common.generation_options import (
    GenerationOptions,
    add_generation_flags,
    generation_options,
)
from benchmark_common.options import EvaluationOptions, add_evaluation_flags, evaluation_options

from .trace_flags import TraceOptions, add_trace_flags, trace_options

__all__ = ["FlagError", "Options", "build_parser", "parse_bool", "parse_dtype", "parse_options"]

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
OPTIMIZERS = ("sgd", "lars", "adamw")
CHECKPOINTING = ("none", "selective", "full")
DATA_PARALLEL = ("auto", "fsdp", "ddp")
OPTIMIZER_IMPLEMENTATIONS = ("fused", "foreach")


def parse_inductor_option(text: str) -> tuple[str, object]:
    """NAME=VALUE, the value read as JSON where it parses (true, 3, 0.5), else as a string."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    if isinstance(parsed, list | dict) or parsed is None:
        parsed = value
    return name.strip(), parsed


@dataclass(frozen=True)
class Options(ProtocolOptions):
    """Parsed and checked options (the attributes mirror the flags)."""

    data_backend: str
    data_shuffle: bool
    num_loader_threads: int
    decode: str
    data_loader_only: bool
    synthetic_data_location: str
    cudnn_benchmark: bool
    cudnn_fastest: bool
    tf32: bool
    #: True, False or "auto" (channels-last for image models on a GPU: runner.memory_format_for).
    channels_last: bool | str
    compile: bool
    compile_mode: str
    #: torch._inductor.config settings for torch.compile, (name, value) pairs.
    inductor_options: list[tuple[str, object]]
    optimizer: str
    optimizer_impl: str
    freezing: bool
    cuda_graphs: bool
    num_threads: int
    ddp_bucket_cap_mb: float
    ddp_static_graph: bool
    ddp_broadcast_buffers: bool
    ddp_comm_hook: str
    extra_models: str
    #: The model's class count; 0: the registered one.
    num_classes: int
    timing: str
    compile_ddp: str
    lr: float
    #: Transformers: tokens per sequence (0: the model's default).
    seq_len: int
    activation_checkpointing: str
    #: fsdp or ddp over several replicas; auto: fsdp for transformers, ddp for the others.
    data_parallel: str
    #: The evaluation flags (--scenario, --weights, ...: docs/evaluation.md).
    evaluation: EvaluationOptions = EvaluationOptions()
    #: The LLM generation flags (--token_lengths, --input_tokens, ...: docs/llm-serving.md).
    generation: GenerationOptions = GenerationOptions()
    #: The tracing flags (--trace_level, ...: docs/tracing.md).
    trace: TraceOptions = TraceOptions()

    @property
    def phase(self) -> str:
        """'inference' or 'training'."""
        return "inference" if self.forward_only else "training"


def build_parser() -> argparse.ArgumentParser:
    """Every flag the backend accepts."""
    p = FlagParser(
        prog="benchmarks.py",
        description="PyTorch benchmark backend of dlbs: times training or inference of one model.",
    )
    p.add_argument(
        "--model", required=True, help="model id; an unknown id is an error that lists every id"
    )
    add_bool_flag(p, "forward_only", False, "inference if true, else training")
    p.add_argument("--batch_size", type=int, default=16, help="per-replica batch")
    p.add_argument("--num_batches", type=int, default=100, help="timed iterations")
    p.add_argument("--num_warmup_batches", type=int, default=1, help="untimed iterations first")
    p.add_argument("--num_gpus", type=int, default=1, help="GPUs on this node (one process each)")
    p.add_argument("--device", default="gpu", choices=["cpu", "gpu", "cuda"], help="compute device")
    p.add_argument(
        "--dtype", type=parse_dtype, default="float32", help="float32, float16 or bfloat16"
    )
    p.add_argument("--data_dir", default="", help="dataset path; empty means synthetic data")
    p.add_argument(
        "--data_backend",
        default="caffe_lmdb",
        choices=["caffe_lmdb", "image_folder"],
        help="the format of --data_dir",
    )
    add_bool_flag(p, "data_shuffle", False, "shuffle the real dataset every epoch")
    p.add_argument("--num_loader_threads", type=int, default=4, help="data loader worker processes")
    p.add_argument(
        "--decode",
        default="cpu",
        choices=["cpu", "gpu"],
        help="real data: decode and augment images on the host (DataLoader workers, Pillow) "
        "or on the GPU (nvJPEG, image_folder of JPEG files)",
    )
    add_bool_flag(p, "data_loader_only", False, "time only the data loader (no model)")
    p.add_argument(
        "--synthetic_data_location",
        default="device",
        choices=["device", "pinned_host"],
        help="synthetic batch kept on the device, or copied from pinned host memory every step",
    )
    add_bool_flag(p, "cudnn_benchmark", True, "cuDNN autotuner (torch.backends.cudnn.benchmark)")
    add_bool_flag(
        p,
        "cudnn_fastest",
        False,
        "exhaustive cuDNN autotuning (benchmark on, benchmark_limit=0): the nearest thing "
        "today to the old cudnn.fastest",
    )
    add_bool_flag(
        p, "tf32", True, "allow TF32 in float32 matmuls and convolutions (Ampere and newer)"
    )
    p.add_argument(
        "--channels_last",
        type=parse_auto_bool,
        nargs="?",
        const=True,
        default="auto",
        help="NHWC memory format for model and input; auto: for image models on a GPU",
    )
    add_bool_flag(p, "compile", False, "torch.compile the model")
    p.add_argument(
        "--compile_mode", default="default", choices=COMPILE_MODES, help="torch.compile mode"
    )
    p.add_argument(
        "--inductor_options",
        type=parse_inductor_option,
        nargs="*",
        default=[],
        metavar="NAME=VALUE",
        help="torch._inductor.config settings for --compile (coordinate_descent_tuning=true)",
    )
    p.add_argument("--optimizer", default="sgd", choices=OPTIMIZERS,
                   help="training: SGD with momentum, LARS (MLPerf's ResNet-50 optimizer) or "
                        "AdamW (betas 0.9/0.95, weight decay 0.1: the LLM recipe)")
    p.add_argument("--optimizer_impl", default="fused", choices=OPTIMIZER_IMPLEMENTATIONS,
                   help="torch.optim's fused kernel or its multi-tensor (foreach) one")
    add_bool_flag(
        p,
        "freezing",
        False,
        "inference with --compile: inductor's freezing (weights folded into the graph as "
        "constants; on CPU, convolution weights prepacked for oneDNN)",
    )
    add_bool_flag(
        p,
        "cuda_graphs",
        False,
        "GPU: capture the step in a CUDA graph (inference: the forward pass; training: the "
        "whole step, forward to optimizer)",
    )
    p.add_argument(
        "--num_threads", type=int, default=0, help="CPU intra-op threads (0: torch default)"
    )
    p.add_argument("--ddp_bucket_cap_mb", type=float, default=25.0, help="DDP gradient bucket size")
    add_bool_flag(p, "ddp_static_graph", False, "DDP static_graph=True")
    add_bool_flag(
        p,
        "ddp_broadcast_buffers",
        False,
        "DDP broadcasts buffers (batch-norm statistics) from rank 0 every forward",
    )
    p.add_argument(
        "--ddp_comm_hook",
        default="none",
        choices=["none", "fp16", "bf16"],
        help="compress gradients to this type for the all-reduce",
    )
    p.add_argument(
        "--compile_ddp",
        default="whole_graph",
        choices=["split", "whole_graph"],
        help="torch.compile with DDP: split the graph at gradient buckets so the all-reduce "
        "overlaps backward (torch's default), or compile it whole (all-reduce after backward)",
    )
    p.add_argument("--extra_models", default="", help="a Python file registering more models")
    add_num_classes_flag(p)
    p.add_argument(
        "--timing",
        default="sync",
        choices=["sync", "events"],
        help="GPU: synchronize after every batch (sync), or stamp batch ends with CUDA events "
        "and synchronize once at the end (events)",
    )
    p.add_argument("--lr", type=float, default=0.01, help="learning rate")
    p.add_argument("--seq_len", type=int, default=0,
                   help="transformers: tokens per sequence (0: the model's default)")
    p.add_argument("--activation_checkpointing", default="none", choices=CHECKPOINTING,
                   help="transformers: recompute each block's activations in backward: none, "
                        "selective (all but matmul and attention outputs) or full")
    p.add_argument("--data_parallel", default="auto", choices=DATA_PARALLEL,
                   help="several replicas: FSDP2 (fully_shard, transformers only) or DDP; "
                        "auto: fsdp for transformers, ddp for the other models")
    add_evaluation_flags(p)
    add_generation_flags(p)
    add_trace_flags(p)
    return p


def parse_options(argv: Sequence[str] | None = None) -> Options:
    """Parse ``argv`` and check the values that argparse cannot; raises FlagError."""
    ns = build_parser().parse_args(argv)
    if ns.device == "cuda":
        ns.device = "gpu"
    evaluation = evaluation_options(ns)
    generation = generation_options(ns)
    trace = trace_options(ns, ns.device)
    opts = Options(**vars(ns), evaluation=evaluation, generation=generation, trace=trace)
    if trace.enabled and evaluation.is_evaluation:
        raise FlagError("--trace_level traces the benchmark's own loop, not a --scenario "
                        "or --predict")
    if opts.batch_size < 1:
        raise FlagError(f"--batch_size must be >= 1, got {opts.batch_size}")
    if opts.num_batches < 1:
        raise FlagError(f"--num_batches must be >= 1, got {opts.num_batches}")
    if opts.num_warmup_batches < 0:
        raise FlagError(f"--num_warmup_batches must be >= 0, got {opts.num_warmup_batches}")
    if opts.num_loader_threads < 0:
        raise FlagError(f"--num_loader_threads must be >= 0, got {opts.num_loader_threads}")
    if opts.seq_len < 0:
        raise FlagError(f"--seq_len must be >= 0, got {opts.seq_len}")
    if opts.num_threads < 0:
        raise FlagError(f"--num_threads must be >= 0, got {opts.num_threads}")
    if opts.device == "gpu" and opts.num_gpus < 1:
        raise FlagError(f"--num_gpus must be >= 1 with --device gpu, got {opts.num_gpus}")
    if opts.cuda_graphs and opts.device != "gpu":
        raise FlagError("--cuda_graphs needs --device gpu")
    if (opts.cuda_graphs and not opts.forward_only and opts.dtype == "float16"
            and opts.optimizer_impl != "fused"):
        raise FlagError("--cuda_graphs with float16 training needs --optimizer_impl fused (the "
                        "foreach step reads GradScaler's overflow flag on the host, which a CUDA "
                        "graph cannot capture)")
    if opts.inductor_options and not opts.compile:
        raise FlagError("--inductor_options configures torch.compile: add --compile true")
    if opts.decode == "gpu" and opts.device != "gpu":
        raise FlagError("--decode gpu decodes on the GPU: needs --device gpu")
    if opts.decode == "gpu" and opts.data_dir and opts.data_backend != "image_folder":
        raise FlagError("--decode gpu reads JPEG files of an image_folder (--data_backend "
                        "image_folder)")
    if opts.freezing and not (opts.compile and opts.forward_only):
        raise FlagError("--freezing applies to compiled inference (--compile true "
                        "--forward_only true)")
    if opts.data_loader_only and not opts.data_dir:
        raise FlagError("--data_loader_only needs a dataset (--data_dir)")
    if evaluation.is_evaluation and not opts.forward_only:
        what = "--predict" if evaluation.predict else f"--scenario {evaluation.scenario}"
        raise FlagError(f"{what} runs inference: add --forward_only true")
    if evaluation.is_evaluation and opts.data_loader_only:
        raise FlagError("--data_loader_only times the data loader alone; it has no scenarios")
    return opts
