"""What the events of a trace mean: the conventions of docs/tracing.md ("The trace file").

The backends write Chrome traces whose own spans carry dlbs's categories; operators, kernels
and copies keep the categories their framework's profiler gives them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: One span per traced batch, named `step`, with `args.batch`.
STEP = "dlbs.step"
#: The parts of a step: `data_wait`, `forward`, `backward`, `communication`, `optimizer`.
PHASE = "dlbs.phase"
#: One span per call of a module or block, named as the model names it; `args.parent` is the
#: enclosing layer span's name ("" at the top), `args.depth` its nesting depth.
LAYER = "dlbs.layer"

PHASES = ("data_wait", "forward", "backward", "communication", "optimizer")

#: Framework operators: PyTorch's profiler (`cpu_op`), MXNet's profiler (`operator`).
OPERATOR_CATEGORIES = frozenset({"cpu_op", "operator"})
#: An operator's input shapes, one list of dims per input (PyTorch's `record_shapes`).
INPUT_SHAPES_ARG = "Input Dims"
#: Work on a GPU: kernels and copies (PyTorch's profiler through CUPTI).
KERNEL_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
#: The layer, operator and phase a kernel was launched from (written by the backend).
KERNEL_LAYER_ARG = "dlbs.layer"
KERNEL_OPERATOR_ARG = "dlbs.operator"
KERNEL_PHASE_ARG = "dlbs.phase"

#: Collectives of PyTorch's process groups (`nccl:all_reduce`, `gloo:broadcast`, ...: the
#: process group's own annotations, `user_annotation` spans) and NCCL's kernels: what the
#: summary counts as communication when no phase names it.
COMMUNICATION = re.compile(r"^(nccl|gloo|mpi|ucc):|^ncclDevKernel|^ncclKernel", re.IGNORECASE)
_COLLECTIVE_CATEGORIES = OPERATOR_CATEGORIES | KERNEL_CATEGORIES | {"user_annotation"}
#: The step spans of a trace torch's own profiler schedule wrote (no dlbs spans).
TORCH_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")


@dataclass(frozen=True)
class Span:
    """A complete event ("X", or a matched "B"/"E" pair): microseconds, as in the file."""

    cat: str
    name: str
    ts: float
    dur: float
    pid: Any
    tid: Any
    args: dict[str, Any]

    @property
    def end(self) -> float:
        return self.ts + self.dur


def is_step(span: Span) -> bool:
    """A dlbs step span, or one of torch's `ProfilerStep#N` spans."""
    return span.cat == STEP or (span.cat == "user_annotation" and
                                TORCH_PROFILER_STEP.match(span.name) is not None)


def is_communication(span: Span) -> bool:
    """A collective operator or kernel (see `COMMUNICATION`)."""
    return span.cat in _COLLECTIVE_CATEGORIES and COMMUNICATION.search(span.name) is not None
