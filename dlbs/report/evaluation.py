"""The evaluation reports: `--type latency` and `--type accuracy` (docs/evaluation.md).

Tables as regular reports make them (tables.py): one row per experiment, keyed by every
identity parameter that varies, led by the keys below; each type shows only the experiments
of its scenarios (`exp.scenario`), and counts the others it leaves out.

- latency: the LoadGen performance scenarios; latency p50, p90, p99 (ms), the achieved QPS,
  the target QPS (server; max_qps: the starting rate), the max QPS (max_qps) and whether
  the latency bound held (server, max_qps).
- accuracy: the accuracy scenario; top-1, top-5, the samples classified, and the weights
  file as a row key.
"""

from __future__ import annotations

import numpy as np

from dlbs.results.columns import Attempts

LATENCY, ACCURACY = "latency", "accuracy"
TYPES = (LATENCY, ACCURACY)
TITLES = {LATENCY: "Latency report", ACCURACY: "Accuracy report"}
SCENARIOS = {LATENCY: ("single_stream", "multi_stream", "server", "offline", "max_qps"),
             ACCURACY: ("accuracy",)}
# Row keys always shown (tables.LEAD_KEYS), before every other identity key that varies.
LEAD_KEYS = {
    LATENCY: ("exp.model", "exp.framework", "exp.scenario", "exp.replica_batch"),
    ACCURACY: ("exp.model", "exp.framework", "exp.weights"),
}
DEFAULT_METRICS = {
    LATENCY: ("results.latency_p50", "results.latency_p90", "results.latency_p99",
              "results.qps", "results.target_qps", "results.max_qps",
              "results.latency_bound_met"),
    ACCURACY: ("results.top1", "results.top5", "results.num_samples"),
}


def in_scope(kind: str, attempts: Attempts) -> tuple[np.ndarray, int]:
    """The attempts (indices) of the report's scenarios, and how many others were left out."""
    wanted = SCENARIOS[kind]
    column = attempts.column("exp.scenario")
    inside = np.array([value in wanted for value in column.values], dtype=bool)
    kept = np.flatnonzero(inside[column.codes])
    return kept, attempts.size - len(kept)
