"""`--type latency` with the decoders' token latencies (docs/llm-serving.md).

The latency report of the LoadGen scenarios (latency.py: its rows, columns and chart), and
besides: a decoder's `benchmark`, which measures the same token latencies as its LoadGen
scenarios, and, where some experiment shown has them, the decoders' time to first token and
time per output token (p50, p99) and their tokens per second (`LLM_COLUMNS`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from dlbs.report.identity import has_value_of
from dlbs.report.kinds import latency
from dlbs.report.kinds.base import BENCHMARK, SCENARIO, ReportKind, scenario_of
from dlbs.report.kinds.regular import Regular
from dlbs.results.columns import Attempts

#: The decoders' values, shown where some experiment has them.
LLM_COLUMNS = ("results.ttft_p50", "results.ttft_p99", "results.tpot_p50", "results.tpot_p99",
               "results.tokens_per_second")
#: What marks a decoder's benchmark: its time to first token.
DECODER_MARK = "results.ttft_p50"


@dataclass(frozen=True)
class TokenLatency(Regular):
    """The latency report with a decoder's benchmark and its columns (see the module)."""

    def in_scope(self, attempts: Attempts) -> tuple[np.ndarray | None, int]:
        column = attempts.column(SCENARIO)
        scenario = np.array([scenario_of(value) for value in column.values],
                            dtype=object)[column.codes]
        inside = np.array([self.shows(value) for value in scenario.tolist()], dtype=bool)
        inside |= (scenario == BENCHMARK) & has_value_of(attempts, DECODER_MARK)
        kept = np.flatnonzero(inside)
        return kept, attempts.size - len(kept)


KIND = TokenLatency(**{field.name: getattr(latency.KIND, field.name)
                       for field in dataclasses.fields(ReportKind)}, extras=LLM_COLUMNS)
