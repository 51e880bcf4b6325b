"""The tracing flags (docs/backends/protocol.md section 1), checked before torch is imported."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from benchmark_common.flags import TRACE_LEVELS, check_trace_flags, traces_at_least


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
        return traces_at_least(self.level, level)


def add_trace_flags(parser: argparse.ArgumentParser) -> None:
    """The tracing flags; `trace_options` takes them out of the parsed namespace."""
    parser.add_argument("--trace_level", default="none", choices=TRACE_LEVELS,
                        help="after the timed batches, trace more at this level (none: no trace)")
    parser.add_argument("--trace_batches", type=int, default=5, help="batches to trace")
    parser.add_argument("--trace_file", default="",
                        help="the Chrome trace to write (.json.gz); needed with --trace_level")


def trace_options(namespace: argparse.Namespace, device: str) -> TraceOptions:
    """The tracing flags, checked and removed from `namespace`; raises FlagError."""
    options = TraceOptions(namespace.__dict__.pop("trace_level"),
                           namespace.__dict__.pop("trace_batches"),
                           namespace.__dict__.pop("trace_file"))
    check_trace_flags(options.level, options.batches, options.file, device)
    return options
