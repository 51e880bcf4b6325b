"""`--type latency`: the LoadGen performance scenarios (docs/evaluation.md).

One row per experiment, led by the model, framework, scenario and batch; latency p50, p90,
p99 (ms), the achieved QPS, the target QPS (server; max_qps: the starting rate), the max QPS
(max_qps) and whether the latency bound held (server, max_qps). The performance scenarios
are every scenario but `benchmark` (the backend's own loop) and `accuracy`.
"""

from __future__ import annotations

from dlbs.report.kinds.base import BENCHMARK, ReportKind

KIND = ReportKind(
    "latency", "Latency report",
    lead_keys=("exp.model", "exp.framework", "exp.scenario", "exp.replica_batch"),
    default_metrics=("results.latency_p50", "results.latency_p90", "results.latency_p99",
                     "results.qps", "results.target_qps", "results.max_qps",
                     "results.latency_bound_met"),
    not_scenarios=(BENCHMARK, "accuracy"))
