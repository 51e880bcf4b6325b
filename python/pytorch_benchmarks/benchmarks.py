"""PyTorch benchmark backend of dlbs: ``python benchmarks.py --model resnet50 ...``.

Runs stand-alone (no dlbs needed). Prints its results as ``__<key>__=<json>`` lines (see
docs/backends/protocol.md); any failure prints ``__results.status__="failure"`` with the
reason and exits non-zero. With several processes (torchrun, srun) it reads WORLD_SIZE, RANK
and LOCAL_RANK from the environment and only rank 0 prints results.
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

from pytorch_benchmarks.cli import FlagError, parse_options  # noqa: E402
from pytorch_benchmarks.errors import UserError  # noqa: E402


class Terminated(BaseException):
    """SIGTERM (a launcher stopping the job, a timeout): still report the failure."""


def _is_torch_out_of_memory(exc: BaseException) -> bool:
    # Only a torch that is imported can have raised it (and a failed `import torch` must
    # not be retried while its failure is reported).
    torch = sys.modules.get("torch")
    error_type = getattr(torch, "OutOfMemoryError", None)
    return error_type is not None and isinstance(exc, error_type)


def _failure_message(exc: BaseException) -> str:
    """A one-line reason; out-of-memory is named as such."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if _is_torch_out_of_memory(exc) or "out of memory" in str(exc).lower():
        reason = f"out of memory: {text}"
    else:
        reason = f"{type(exc).__name__}: {text}"
    if _world_size() > 1:
        reason = f"rank {os.environ.get('RANK', '?')}: {reason}"
    return reason


# What a collective raises when another rank has died (gloo, NCCL, the TCP store).
_PEER_FAILURE_SIGNS = (
    "connection closed by peer",
    "connection reset by peer",
    "remote worker",
    "communicator was aborted",
    "broken pipe",
)


def _caused_by_another_rank(exc: BaseException) -> bool:
    """SIGTERM from torchrun, or a collective that lost a peer: the symptom, not the cause."""
    if isinstance(exc, Terminated):
        return True
    dist = sys.modules.get("torch.distributed")  # not imported: it raised nothing
    if isinstance(exc, getattr(dist, "DistNetworkError", ())):
        return True
    text = str(exc).lower()
    return any(sign in text for sign in _PEER_FAILURE_SIGNS)


def _world_size() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def _refuse(message: str) -> int:
    """A user error: the failure keys, one line on stderr, exit 2 and no traceback."""
    refuse(message)
    return UserError.exit_status


def _abort(exc: BaseException) -> None:
    """A failure inside a LoadGen callback: report it and end the process there and then.

    An exception cannot travel back through LoadGen's C++ threads to ``main``.
    """
    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    if isinstance(exc, UserError):
        emit_failure(" ".join(str(exc).split()))
        status = UserError.exit_status
    else:
        emit_failure(_failure_message(exc))
        status = 3 if _is_torch_out_of_memory(exc) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _report_failure(exc: BaseException) -> None:
    """The failure keys for an exception that ends the run."""
    if _world_size() > 1 and _caused_by_another_rank(exc):
        # The rank that failed first has printed the reason; a log parser keeps the last
        # message it sees, so the ranks that merely lost their peers add none.
        emit("results.status", "failure")
        emit("results.end_time", now_iso())
    else:
        emit_failure(_failure_message(exc))


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, run, print the protocol lines; return the exit status."""
    termination = Termination(Terminated, _report_failure)
    termination.install()
    start_time = now_iso()
    try:
        opts = parse_options(argv)
    except FlagError as exc:
        termination.claim()
        return _refuse(f"bad flag: {exc} (see --help)")
    try:
        import torch  # noqa: F401  (its import is part of what a SIGTERM may interrupt)

        from pytorch_benchmarks import distributed
        from pytorch_benchmarks.runner import run_benchmark

        topology = distributed.topology_from_env()
        if topology.is_main:
            emit("results.start_time", start_time)
        from pytorch_benchmarks.generation.setup import is_decoder

        if opts.forward_only and is_decoder(opts.model):
            from pytorch_benchmarks.generation.system import generate

            results = generate(opts, topology, _abort)
        elif opts.evaluation.is_evaluation:
            from pytorch_benchmarks.evaluation import evaluate

            results = evaluate(opts, topology, _abort)
        else:
            results = run_benchmark(opts, topology)
        if results is not None:
            for key, value in results.items():
                emit(key, value)
            emit("results.status", "ok")
            emit("results.end_time", now_iso())
        distributed.shutdown()
        return 0
    except UserError as exc:
        termination.claim()
        rank = f"rank {os.environ.get('RANK', '?')}: " if _world_size() > 1 else ""
        return _refuse(f"{rank}{exc}")
    except (Exception, Terminated, KeyboardInterrupt) as exc:
        termination.claim()
        traceback.print_exc(file=sys.stderr)
        _report_failure(exc)
        return 3 if _is_torch_out_of_memory(exc) else 1


if __name__ == "__main__":
    status = main()
    if _world_size() > 1:
        # A rank of a gloo job whose process group was destroyed could still abort in the
        # interpreter's teardown ("terminate called without an active exception": a thread of
        # torch's left joinable), and the launcher then failed a job whose results were out,
        # about one run in 25 on a loaded machine. Everything is written and no handler of
        # ours is left to run: the rank ends here, without that teardown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
