"""The backend's command line (docs/backends/protocol.md section 1 plus ONNX Runtime's flags).

Everything is checked here, before numpy, onnxruntime or torch is imported, so a bad flag
fails in milliseconds.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from benchmark_common.flags import (
    FlagError,
    FlagParser,
    ProtocolOptions,
    add_bool_flag,
    add_num_classes_flag,
    parse_dtype,
)

__all__ = ["FlagError", "Options", "build_parser", "parse_options"]

#: `--graph_optimization_level` -> the name of onnxruntime.GraphOptimizationLevel's member.
OPTIMIZATION_LEVELS = {
    "disabled": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}
#: `--execution_provider` -> ONNX Runtime's provider name.
PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}
EXECUTION_MODES = ("sequential", "parallel")


@dataclass(frozen=True)
class Options(ProtocolOptions):
    """Parsed and checked options (the attributes mirror the flags)."""

    graph_optimization_level: str
    execution_provider: str
    intra_op_threads: int
    inter_op_threads: int
    execution_mode: str
    allow_spinning: bool
    model_file: str
    cache_dir: str
    pytorch_backend: str
    seed: int
    #: The exported model's class count; 0: the registered one.
    num_classes: int


def build_parser() -> argparse.ArgumentParser:
    """Every flag the backend accepts."""
    p = FlagParser(prog="benchmarks.py",
                description="ONNX Runtime benchmark backend of dlbs: times inference of one "
                            "model (the PyTorch backend's, exported to ONNX, or a .onnx file).")
    p.add_argument("--model", required=True,
                   help="model id of the PyTorch backend (exported to ONNX); with --model_file "
                        "only the model's name")
    add_bool_flag(p, "forward_only", False, "inference if true; training is refused",
                  show_default=True)
    p.add_argument("--batch_size", type=int, default=16, help="instances per batch")
    p.add_argument("--num_batches", type=int, default=100, help="timed batches")
    p.add_argument("--num_warmup_batches", type=int, default=1, help="untimed batches first")
    p.add_argument("--num_gpus", type=int, default=1,
                   help="GPUs (with --device gpu: exactly 1; CUDA_VISIBLE_DEVICES picks it)")
    p.add_argument("--device", default="gpu", choices=["cpu", "gpu"], help="compute device")
    p.add_argument("--dtype", type=parse_dtype, default="float32",
                   help="float32, float16 or bfloat16 (of the exported model and its input)")
    p.add_argument("--data_dir", default="", help="must be empty: synthetic data only")
    p.add_argument("--graph_optimization_level", default="all",
                   choices=list(OPTIMIZATION_LEVELS), help="ONNX Runtime's graph optimizations")
    p.add_argument("--execution_provider", default="cpu", choices=list(PROVIDERS),
                   help="cpu, cuda or tensorrt (where this onnxruntime build has it)")
    p.add_argument("--intra_op_threads", "--num_threads", dest="intra_op_threads", type=int,
                   default=0, help="threads of one operator; 0 = ONNX Runtime's choice")
    p.add_argument("--inter_op_threads", type=int, default=0,
                   help="threads for independent operators (--execution_mode parallel); 0 = "
                        "ONNX Runtime's choice")
    p.add_argument("--execution_mode", default="sequential", choices=list(EXECUTION_MODES),
                   help="run operators one at a time, or independent ones in parallel")
    add_bool_flag(p, "allow_spinning", True, "idle intra-op threads spin for work",
                  show_default=True)
    p.add_argument("--model_file", default="",
                   help="a .onnx file to run instead of exporting --model (torch not needed)")
    p.add_argument("--cache_dir", default="onnx_cache",
                   help="folder of exported models, one file per model, dtype, batch and weights")
    p.add_argument("--pytorch_backend", default="",
                   help="folder of the PyTorch backend whose models are exported (default: "
                        "pytorch_benchmarks beside this backend's folder)")
    p.add_argument("--seed", type=int, default=0,
                   help="torch.manual_seed before the exported model is built (its weights)")
    add_num_classes_flag(p, "the exported model's number of classes, its last layer (0: the "
                            "model's own)")
    return p


def parse_options(argv: Sequence[str] | None = None) -> Options:
    """Parse ``argv`` and check what argparse cannot; raises FlagError."""
    opts = Options(**vars(build_parser().parse_args(argv)))
    if not opts.forward_only:
        raise FlagError("ONNX Runtime runs inference only: add --forward_only")
    for name in ("batch_size", "num_batches"):
        if getattr(opts, name) < 1:
            raise FlagError(f"--{name} must be at least 1, got {getattr(opts, name)}")
    for name in ("num_warmup_batches", "intra_op_threads", "inter_op_threads"):
        if getattr(opts, name) < 0:
            raise FlagError(f"--{name} must not be negative, got {getattr(opts, name)}")
    if opts.data_dir:
        raise FlagError("--data_dir: the ONNX Runtime backend runs synthetic data only")
    if opts.dtype == "bfloat16":
        raise FlagError("--dtype bfloat16: ONNX Runtime's Python API takes numpy inputs, and "
                        "numpy has no bfloat16 (use float32 or float16)")
    if opts.inter_op_threads and opts.execution_mode != "parallel":
        raise FlagError("--inter_op_threads needs --execution_mode parallel (ONNX Runtime "
                        "ignores it in sequential mode)")
    if opts.device == "gpu":
        if opts.execution_provider == "cpu":
            raise FlagError("--device gpu needs --execution_provider cuda or tensorrt")
        if opts.num_gpus != 1:
            raise FlagError(f"--device gpu runs one session on one GPU: --num_gpus must be 1, "
                            f"got {opts.num_gpus}")
    elif opts.execution_provider != "cpu":
        raise FlagError(f"--execution_provider {opts.execution_provider} needs --device gpu")
    if opts.model_file and opts.num_classes:
        raise FlagError("--num_classes sizes an exported model of the PyTorch backend; a "
                        "--model_file runs as it is")
    if opts.model_file and not opts.model_file.endswith(".onnx"):
        raise FlagError(f"--model_file {opts.model_file!r}: expected a .onnx file")
    return opts
