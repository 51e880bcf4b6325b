"""`--type latency`: the LoadGen performance scenarios, and the decoders' token latencies.

One row per experiment, led by the model, framework, scenario and batch; latency p50, p90,
p99 (ms), the achieved QPS, the target QPS (server; max_qps: the starting rate), the max QPS
(max_qps) and whether the latency bound held (server, max_qps). The performance scenarios
are every scenario but `benchmark` (the backend's own loop) and `accuracy`; a decoder's
`benchmark` is shown too, since it measures the same token latencies (docs/llm-serving.md).
Where some experiment shown has them, the decoders' time to first token and time per output
token (p50, p99) and their tokens per second stand beside (`LLM_COLUMNS`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dlbs.report.identity import has_value_of
from dlbs.report.kinds.base import BENCHMARK, SCENARIO, scenario_of
from dlbs.report.kinds.regular import Regular
from dlbs.results.columns import Attempts

#: The decoders' values, shown where some experiment has them.
LLM_COLUMNS = ("results.ttft_p50", "results.ttft_p99", "results.tpot_p50", "results.tpot_p99",
               "results.tokens_per_second")
#: What marks a decoder's benchmark: its time to first token.
DECODER_MARK = "results.ttft_p50"


@dataclass(frozen=True)
class Latency(Regular):
    """The latency report (see the module)."""

    def in_scope(self, attempts: Attempts) -> tuple[np.ndarray | None, int]:
        column = attempts.column(SCENARIO)
        scenario = np.array([scenario_of(value) for value in column.values],
                            dtype=object)[column.codes]
        inside = (scenario != BENCHMARK) & (scenario != "accuracy")
        inside |= (scenario == BENCHMARK) & has_value_of(attempts, DECODER_MARK)
        kept = np.flatnonzero(inside)
        return kept, attempts.size - len(kept)


KIND = Latency(
    "latency", "Latency report",
    lead_keys=("exp.model", "exp.framework", "exp.scenario", "exp.replica_batch"),
    default_metrics=("results.latency_p50", "results.latency_p90", "results.latency_p99",
                     "results.qps", "results.target_qps", "results.max_qps",
                     "results.latency_bound_met"),
    not_scenarios=(BENCHMARK, "accuracy"), extras=LLM_COLUMNS)
