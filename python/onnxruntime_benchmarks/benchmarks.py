"""ONNX Runtime benchmark backend of dlbs: ``python benchmarks.py --model resnet50 ...``.

Runs stand-alone (no dlbs needed): the standard library, numpy and onnxruntime, plus torch,
onnx and onnxscript only to export one of the PyTorch backend's models (not for a
``--model_file``). Prints its results as ``__<key>__=<json>`` lines
(docs/backends/protocol.md); any failure prints ``__results.status__="failure"`` with the
reason and exits non-zero.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence

if __package__ in (None, ""):
    # Run as a script: make the package importable from the folder that holds it.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmark_common.protocol import emit, emit_failure, now_iso, refuse  # noqa: E402
from benchmark_common.termination import Termination  # noqa: E402

from onnxruntime_benchmarks.errors import UserError  # noqa: E402
from onnxruntime_benchmarks.options import FlagError, parse_options  # noqa: E402

OUT_OF_MEMORY_SIGNS = ("failed to allocate memory", "out of memory", "bad_alloc")


class Terminated(BaseException):
    """SIGTERM (a launcher stopping the job, a timeout): still report the failure."""


def _refuse(message: str) -> int:
    """A user error: the failure keys, one line on stderr, exit 2 and no traceback."""
    refuse(message)
    return UserError.exit_status


def _failure_message(error: BaseException) -> str:
    """A one-line reason; out-of-memory is named as such."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if any(sign in str(error).lower() for sign in OUT_OF_MEMORY_SIGNS):
        return f"out of memory: {text}"
    return f"{type(error).__name__}: {text}"


def _report_failure(error: BaseException) -> None:
    """The failure keys for an exception that ends the run."""
    emit_failure(_failure_message(error))


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, run, print the protocol lines; return the exit status."""
    termination = Termination(Terminated, _report_failure)
    termination.install()
    argv = list(sys.argv[1:] if argv is None else argv)
    start_time = now_iso()
    try:
        opts = parse_options(argv)
    except FlagError as error:
        termination.claim()
        return _refuse(f"bad flag: {error} (see --help)")
    emit("results.start_time", start_time)
    try:
        try:
            from onnxruntime_benchmarks.runner import run_benchmark
        except ImportError as error:
            raise UserError(f"onnxruntime is not installed in {sys.executable} ({error}); "
                            f"pip install onnxruntime") from None
        results = run_benchmark(opts, argv)
        for key, value in results.items():
            emit(key, value)
        emit("results.status", "ok")
        emit("results.end_time", now_iso())
        return 0
    except UserError as error:
        termination.claim()
        return _refuse(str(error))
    except (Exception, Terminated, KeyboardInterrupt) as error:
        termination.claim()
        traceback.print_exc(file=sys.stderr)
        _report_failure(error)
        return 1


if __name__ == "__main__":
    sys.exit(main())
