#!/usr/bin/env python3
"""MXNet benchmark backend of dlbs: run one model, print `__key__=json` facts.

The contract it keeps: docs/backends/protocol.md.

Usage: python benchmarks.py --model resnet50 --device cpu --batch_size 32 --forward_only
Runs stand-alone (it imports only the standard library, numpy and mxnet); `dist_*` kvstores
are started through `python -m mxnet_benchmarks.launch_dist`.
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings

if __package__ in (None, ""):  # run as a script: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmark_common.termination import Termination  # noqa: E402

from mxnet_benchmarks.errors import BenchmarkError  # noqa: E402
from mxnet_benchmarks.options import Options, parse_options  # noqa: E402
from mxnet_benchmarks.protocol import emit, failure, now_iso, say, timing_results  # noqa: E402

#: Environment variables MXNet reads when it starts that change what a run measures.
TUNING_VARIABLES = ("MXNET_CUDNN_AUTOTUNE_DEFAULT", "MXNET_CUDA_ALLOW_TENSOR_CORE",
                    "MXNET_SUBGRAPH_BACKEND", "OMP_NUM_THREADS")
#: Why an MXNet run has no FLOPs (docs/efficiency.md): its models are definitions of their
#: own, which PyTorch's counter cannot read, and MXNet 1.9 has no counter of its own.
FLOPS_UNAVAILABLE = ("MXNet has no FLOP counter, and its model definitions are its own: "
                     "PyTorch's count of the same architecture would be a guess")


def configure_environment(opts: Options) -> None:
    """Settings MXNet reads once, when it is imported: threads, subgraph and cuDNN tuning."""
    if opts.num_threads > 0:
        os.environ["OMP_NUM_THREADS"] = str(opts.num_threads)
    # MKLDNN builds of MXNet 1.x fuse operators by default when a graph is cached; "none"
    # must mean no fusion, and "onednn" selects it explicitly at hybridize time.
    os.environ["MXNET_SUBGRAPH_BACKEND"] = "NONE"
    os.environ["MXNET_CUDNN_AUTOTUNE_DEFAULT"] = "1" if opts.cudnn_autotune else "0"
    # MXNet 1.9 uses numpy aliases that numpy 1.23 deprecates; they are not ours to fix.
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"mxnet(\.|$)")


def report_environment(mxnet) -> None:
    """Say which tuning variables MXNet's engine sees (its C runtime's view, not Python's)."""
    # mxnet.util.getenv (1.6+) reads the C runtime's environment, which the engine reads.
    getenv = getattr(getattr(mxnet, "util", None), "getenv", None) or os.environ.get
    settings = " ".join(f"{name}={getenv(name) or '(unset)'}" for name in TUNING_VARIABLES)
    say(f"MXNet {mxnet.__version__}: {settings}")


def describe(error: BaseException) -> str:
    """One readable line for `results.status_msg` (MXNet errors carry a C++ backtrace)."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    # MXNet's message is its C++ backtrace, whose last line is the reason.
    text = lines[-1] if lines[0].startswith("Traceback") else lines[0]
    name = type(error).__name__
    return (text if text.startswith(name + ":") else f"{name}: {text}")[:1000]


def print_report(report, start_time: str, framework_version: str) -> None:
    """The protocol lines of a successful run (rank 0 only)."""
    emit("exp.model_title", report.model_title)
    emit("exp.framework_ver", framework_version)
    emit("results.start_time", start_time)
    emit("results.warmup_time_data", report.warmup_ms)
    for key, value in timing_results(report.times_ms, report.instances_per_batch).items():
        emit(key, value)
    if report.real_data:
        emit("results.time_data_wait", sum(report.waits_ms) / len(report.waits_ms))
    emit("results.mem_peak", report.mem_peak_mib)
    emit("results.flops_unavailable", FLOPS_UNAVAILABLE)
    for key, value in report.trace.items():
        emit(key, value)
    emit("results.end_time", now_iso())
    emit("results.status", "ok")


def print_evaluation(results: dict, start_time: str, framework_version: str) -> None:
    """The protocol lines of a successful evaluation (docs/evaluation.md)."""
    emit("exp.framework_ver", framework_version)
    emit("results.start_time", start_time)
    for key, value in results.items():
        emit(key, value)
    emit("results.end_time", now_iso())
    emit("results.status", "ok")


def _abort(error: BaseException) -> None:
    """A failure inside a LoadGen callback: report it and end the process there and then.

    An exception cannot travel back through LoadGen's C++ threads to `main`.
    """
    if isinstance(error, BenchmarkError):
        message, status = " ".join(str(error).split()), BenchmarkError.exit_status
        print(f"benchmarks.py: error: {message}", file=sys.stderr)
    else:
        traceback.print_exception(type(error), error, error.__traceback__)
        message, status = describe(error), 1
    failure(message)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark described by `argv`; return the exit status."""
    start_time = now_iso()

    def report_failure(error: BaseException) -> None:
        emit("results.start_time", start_time)
        failure(describe(error))

    # A job scheduler's or launcher's SIGTERM ends the run like Ctrl-C: with a failure
    # status and its reason, not a silent death.
    termination = Termination(KeyboardInterrupt, report_failure)
    termination.install()
    try:
        opts = parse_options(sys.argv[1:] if argv is None else argv)
        configure_environment(opts)
        import mxnet

        from mxnet_benchmarks.runner import run

        report_environment(mxnet)

        if opts.evaluation.is_evaluation:
            from mxnet_benchmarks.evaluation import evaluate

            print_evaluation(evaluate(opts, _abort), start_time, mxnet.__version__)
            return 0
        report, rank = run(opts)
        if rank == 0:
            print_report(report, start_time, mxnet.__version__)
        return 0
    except BenchmarkError as error:
        termination.claim()
        message = " ".join(str(error).split())  # one line, whatever the message holds
        print(f"benchmarks.py: error: {message}", file=sys.stderr)
        emit("results.start_time", start_time)
        failure(message)
        return BenchmarkError.exit_status
    except (Exception, KeyboardInterrupt) as error:  # a failed run must never look valid
        termination.claim()
        traceback.print_exc()
        report_failure(error)
        if isinstance(error, KeyboardInterrupt):
            # Ctrl-C or SIGTERM that came while `import mxnet` was loading the library can
            # leave its engine half made, and the interpreter's exit then waits on it for
            # ever: the failure is printed, so end here, without the library's teardown.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
        return 1


if __name__ == "__main__":
    sys.exit(main())
