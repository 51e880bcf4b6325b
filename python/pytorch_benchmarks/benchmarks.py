"""PyTorch benchmark backend of dlbs: ``python benchmarks.py --model resnet50 ...``.

Runs stand-alone (no dlbs needed). Prints its results as ``__<key>__=<json>`` lines (see
docs/backends/protocol.md); any failure prints ``__results.status__="failure"`` with the
reason and exits non-zero. With several processes (torchrun, srun) it reads WORLD_SIZE, RANK
and LOCAL_RANK from the environment and only rank 0 prints results.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Sequence

if __package__ in (None, ""):
    # Run as a script: make the package importable from the folder that holds it.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmark_common.protocol import emit, emit_failure, now_iso, refuse  # noqa: E402

from pytorch_benchmarks.cli import FlagError, parse_options  # noqa: E402
from pytorch_benchmarks.errors import UserError  # noqa: E402


class Terminated(BaseException):
    """SIGTERM (a launcher stopping the job, a timeout): still report the failure."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated(f"terminated by signal {signum}")


def _failure_message(exc: BaseException) -> str:
    """A one-line reason; out-of-memory is named as such."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    import torch

    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower():
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
    import torch.distributed as dist

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
        import torch

        status = 3 if isinstance(exc, torch.OutOfMemoryError) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, run, print the protocol lines; return the exit status."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    start_time = now_iso()
    try:
        opts = parse_options(argv)
    except FlagError as exc:
        return _refuse(f"bad flag: {exc} (see --help)")
    import torch

    from pytorch_benchmarks import distributed
    from pytorch_benchmarks.runner import run_benchmark

    try:
        topology = distributed.topology_from_env()
        if topology.is_main:
            emit("results.start_time", start_time)
        if opts.evaluation.is_evaluation:
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
        rank = f"rank {os.environ.get('RANK', '?')}: " if _world_size() > 1 else ""
        return _refuse(f"{rank}{exc}")
    except (Exception, Terminated, KeyboardInterrupt) as exc:
        traceback.print_exc(file=sys.stderr)
        if _world_size() > 1 and _caused_by_another_rank(exc):
            # The rank that failed first has printed the reason; a log parser keeps the last
            # message it sees, so the ranks that merely lost their peers add none.
            emit("results.status", "failure")
            emit("results.end_time", now_iso())
        else:
            emit_failure(_failure_message(exc))
        if isinstance(exc, torch.OutOfMemoryError):
            return 3
        return 1


if __name__ == "__main__":
    sys.exit(main())
