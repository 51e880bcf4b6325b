"""The backend's command line (docs/backends/protocol.md section 1), checked before mxnet loads.

Checking everything before the import matters twice: a bad value fails in milliseconds, and
`--num_threads` must reach the environment before MXNet's engine starts.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from benchmark_common.flags import (
    TRACE_LEVELS,
    FlagError,
    FlagParser,
    ProtocolOptions,
    add_bool_flag,
    add_num_classes_flag,
    check_trace_flags,
)
from benchmark_common.options import EvaluationOptions, add_evaluation_flags, evaluation_options

from .errors import BenchmarkError

DEVICES = ("cpu", "gpu")
DTYPES = ("float32", "float16")
KV_STORES = ("local", "device", "dist_sync", "dist_device_sync", "dist_async")
GRAPH_BACKENDS = ("none", "onednn")


@dataclass(frozen=True)
class Options(ProtocolOptions):
    """Everything one benchmark run needs, validated."""

    cpu_contexts: int
    kv_store: str
    num_threads: int
    hybridize: bool
    static_graph: bool
    graph_backend: str
    cudnn_autotune: bool
    data_shuffle: bool
    preprocess_threads: int
    prefetch_buffer: int
    learning_rate: float
    seed: int
    extra_models: str = ""
    #: The model's class count; 0: the registered one.
    num_classes: int = 0
    #: The evaluation flags (--scenario, --weights, ...: docs/evaluation.md).
    evaluation: EvaluationOptions = EvaluationOptions()
    #: The traced pass after the timed batches (docs/tracing.md).
    trace_level: str = "none"
    trace_batches: int = 5
    trace_file: str = ""

    @property
    def is_distributed(self) -> bool:
        """True for the parameter-server kvstores, which need scheduler and servers."""
        return self.kv_store.startswith("dist_")


def _choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise BenchmarkError(f"unknown {name} {value!r}; choose one of: {', '.join(choices)}")


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of `benchmarks.py`."""
    p = FlagParser(prog="benchmarks.py", description="MXNet benchmark backend of dlbs.")
    p.add_argument("--model", required=True, help="model id; an unknown id lists the known ones")
    add_bool_flag(p, "forward_only", False, "inference if true, else training", show_default=True)
    p.add_argument("--batch_size", type=int, default=16, help="per-device batch")
    p.add_argument("--num_batches", type=int, default=10, help="timed iterations")
    p.add_argument("--num_warmup_batches", type=int, default=2, help="untimed iterations first")
    p.add_argument("--num_gpus", type=int, default=1, help="GPUs on this node: gpu(0..N-1)")
    p.add_argument("--cpu_contexts", type=int, default=1,
                   help="with --device cpu: data-parallel over cpu(0..N-1), the multi-GPU code "
                   "path without GPUs (for tests; it does not add cores)")
    p.add_argument("--device", default="gpu", help="cpu or gpu (default: gpu)")
    p.add_argument("--dtype", default="float32", help="float32 or float16")
    p.add_argument("--data_dir", default="", help="empty: synthetic; else a .rec file or a "
                   "directory with one (RecordIO through ImageRecordIter)")
    p.add_argument("--kv_store", default="device", help=", ".join(KV_STORES))
    p.add_argument("--num_threads", type=int, default=0,
                   help="CPU threads for operators (OMP_NUM_THREADS); 0 keeps MXNet's choice")
    add_bool_flag(p, "hybridize", True, "run the network as a cached graph (Gluon hybridize)",
                  show_default=True)
    add_bool_flag(p, "static_graph", True,
                  "hybridize with static_alloc and static_shape (memory planned once)",
                  show_default=True)
    p.add_argument("--graph_backend", default="none",
                   help="subgraph backend for inference: none, or onednn (MXNet's MKLDNN "
                   "fusion on CPU)")
    add_bool_flag(p, "cudnn_autotune", True, "let MXNet pick convolution algorithms on GPU",
                  show_default=True)
    add_bool_flag(p, "data_shuffle", False, "shuffle RecordIO records", show_default=True)
    p.add_argument("--preprocess_threads", type=int, default=4, help="RecordIO decoder threads")
    p.add_argument("--prefetch_buffer", type=int, default=10, help="RecordIO batches prefetched")
    p.add_argument("--learning_rate", type=float, default=0.01, help="SGD learning rate")
    p.add_argument("--seed", type=int, default=1, help="seed of weights and synthetic data")
    p.add_argument("--extra_models", default="",
                   help="a Python file that registers more models with @register_model")
    add_num_classes_flag(p)
    add_evaluation_flags(p)
    p.add_argument("--trace_level", default="none", help="after the timed batches, trace more "
                   f"at this level: {', '.join(TRACE_LEVELS)} (none: no trace)")
    p.add_argument("--trace_batches", type=int, default=5, help="batches to trace")
    p.add_argument("--trace_file", default="",
                   help="the Chrome trace to write (.json.gz); needed with --trace_level")
    return p


def parse_options(argv: list[str]) -> Options:
    """Parse and validate `argv`; any problem is a BenchmarkError naming the flag."""
    try:
        args = build_parser().parse_args(argv)
        evaluation = evaluation_options(args)
    except FlagError as error:
        raise BenchmarkError(str(error)) from None
    opts = Options(**vars(args), evaluation=evaluation)
    _choice("device", opts.device, DEVICES)
    _choice("dtype", opts.dtype, DTYPES)
    _choice("kv_store", opts.kv_store, KV_STORES)
    _choice("graph_backend", opts.graph_backend, GRAPH_BACKENDS)
    for name in ("batch_size", "num_batches", "cpu_contexts"):
        if getattr(opts, name) < 1:
            raise BenchmarkError(f"--{name} must be at least 1, got {getattr(opts, name)}")
    for name in ("num_warmup_batches", "num_threads", "preprocess_threads", "prefetch_buffer"):
        if getattr(opts, name) < 0:
            raise BenchmarkError(f"--{name} must not be negative, got {getattr(opts, name)}")
    if opts.device == "gpu" and opts.num_gpus < 1:
        raise BenchmarkError(f"--num_gpus must be at least 1 with --device gpu, got "
                             f"{opts.num_gpus}")
    if opts.dtype == "float16" and opts.device == "cpu":
        # Checked here so the run fails at once, not after building the network.
        raise BenchmarkError("--dtype float16 needs --device gpu: MXNet 1.9 has no float16 "
                             "matrix multiply or convolution on CPU (use float32)")
    if opts.graph_backend != "none" and not opts.forward_only:
        raise BenchmarkError("--graph_backend applies to inference only; add --forward_only")
    if opts.graph_backend != "none" and not opts.hybridize:
        raise BenchmarkError("--graph_backend needs --hybridize true")
    if opts.graph_backend == "onednn" and opts.device != "cpu":
        raise BenchmarkError("--graph_backend onednn is a CPU backend; use --device cpu")
    if evaluation.is_evaluation:
        what = "--predict" if evaluation.predict else f"--scenario {evaluation.scenario}"
        if not opts.forward_only:
            raise BenchmarkError(f"{what} runs inference: add --forward_only true")
        if opts.is_distributed or (opts.device == "gpu" and opts.num_gpus > 1) or \
                (opts.device == "cpu" and opts.cpu_contexts > 1):
            raise BenchmarkError(f"{what} runs on one device: one GPU (--num_gpus 1) or one "
                                 "CPU context, and a local kvstore")
    _check_trace(opts)
    return opts


def _check_trace(opts: Options) -> None:
    _choice("trace_level", opts.trace_level, TRACE_LEVELS)
    try:
        check_trace_flags(opts.trace_level, opts.trace_batches, opts.trace_file, opts.device)
    except FlagError as error:
        raise BenchmarkError(str(error)) from None
    if opts.trace_level == "none":
        return
    if opts.trace_level == "layer" and opts.hybridize:
        raise BenchmarkError("--trace_level layer times each block's call, which a hybridized "
                             "graph runs as one: add --hybridize false")
    if opts.evaluation.is_evaluation:
        raise BenchmarkError("--trace_level traces the benchmark's own loop, not a --scenario "
                             "or --predict")
