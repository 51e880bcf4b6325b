"""The tracing flags (docs/backends/protocol.md section 1), checked before torch is imported."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

LEVELS = ("none", "step", "layer", "operator", "kernel", "full")


@dataclass(frozen=True)
class TraceOptions:
    """--trace_level, --trace_batches and --trace_file."""

    level: str = "none"
    batches: int = 5
    file: str = ""

    @property
    def enabled(self) -> bool:
        return self.level != "none"

    def at_least(self, level: str) -> bool:
        """Whether this trace records what `level` records (each level adds to the last)."""
        return LEVELS.index(self.level) >= LEVELS.index(level)


def add_trace_flags(parser: argparse.ArgumentParser) -> None:
    """The tracing flags; `trace_options` takes them out of the parsed namespace."""
    parser.add_argument("--trace_level", default="none", choices=LEVELS,
                        help="after the timed batches, trace more at this level (none: no trace)")
    parser.add_argument("--trace_batches", type=int, default=5, help="batches to trace")
    parser.add_argument("--trace_file", default="",
                        help="the Chrome trace to write (.json.gz); needed with --trace_level")


def trace_options(namespace: argparse.Namespace, device: str) -> TraceOptions:
    """The tracing flags, checked and removed from `namespace`; ValueError says what is wrong."""
    options = TraceOptions(namespace.__dict__.pop("trace_level"),
                           namespace.__dict__.pop("trace_batches"),
                           namespace.__dict__.pop("trace_file"))
    if not options.enabled:
        return options
    if options.batches < 1:
        raise ValueError(f"--trace_batches must be >= 1, got {options.batches}")
    if not options.file:
        raise ValueError(f"--trace_level {options.level} needs --trace_file")
    if options.level == "kernel" and device != "gpu":
        raise ValueError("--trace_level kernel traces CUDA kernels: it needs --device gpu")
    return options
