"""LoadGen's own measurements, read back from its detail log (`mlperf_log_detail.txt`).

Each line of the detail log is `:::MLLOG {json}` with a `key` and a `value`; the `result_*`
keys of the run LoadGen reports come last.
Latencies there are nanoseconds; the keys this module returns are in milliseconds, as
docs/backends/protocol.md section 4 says. A run with token latencies (LLMs) also has the time
to first token (`results.ttft_*`), the time per output token (`results.tpot_*`) and tokens
per second (`results.tokens_per_second`).
"""

from __future__ import annotations

import json
import os
from typing import Any

DETAIL_LOG = "mlperf_log_detail.txt"
SUMMARY_LOG = "mlperf_log_summary.txt"
#: results.latency_* <- result_<percentile>_percentile_latency_ns.
PERCENTILES = (("latency_p50", "50.00"), ("latency_p90", "90.00"), ("latency_p95", "95.00"),
               ("latency_p99", "99.00"), ("latency_p999", "99.90"))

#: Token latencies: results.<name>_mean and _<percentile> <- the detail log's keys.
TOKEN_LATENCIES = (("ttft", "result_first_token_mean_latency_ns",
                    "result_first_token_{}_percentile_latency_ns"),
                   ("tpot", "result_time_to_output_token_mean",
                    "result_time_per_output_token_{}_percentile_ns"))
#: Tokens per second: completed ones (server), or all of the run's (offline).
TOKEN_RATES = ("result_completed_tokens_per_second", "result_tokens_per_second")

#: LoadGen's checks of a run (detail-log keys, false when the check failed) and their words.
INVALID_CHECKS = (("result_min_duration_met", "min duration not met"),
                  ("result_min_queries_met", "min query count not met"),
                  ("result_perf_constraints_met", "latency bound not met"),
                  ("early_stopping_met", "early stopping's percentile bound not met"))


class LoadGenLog:
    """The last value of every key of a detail log, and its messages in order."""

    def __init__(self, folder: str) -> None:
        self.path = os.path.join(folder, DETAIL_LOG)
        self.values: dict[str, Any] = {}
        self.messages: list[str] = []
        self.errors: list[str] = []
        with open(self.path, encoding="utf-8", errors="replace") as log:
            for line in log:
                if not line.startswith(":::MLLOG "):
                    continue
                try:
                    entry = json.loads(line[len(":::MLLOG "):])
                except ValueError:
                    continue  # a line cut short: LoadGen never writes one, but keep reading
                key, value = entry.get("key"), entry.get("value")
                self.values[key] = value
                if key == "generic_message":
                    self.messages.append(str(value))
                if (entry.get("metadata") or {}).get("is_error"):
                    self.errors.append(f"{key}: {value}")

    def results(self) -> dict[str, Any]:
        """The protocol's `results.*` keys of the reported run (see the module doc)."""
        values = self.values
        samples_per_query = values.get("generated_samples_per_query")
        if not isinstance(samples_per_query, int) or samples_per_query < 1:
            samples_per_query = 1
        found: dict[str, Any] = {}
        mean = values.get("result_mean_latency_ns")
        if isinstance(mean, (int, float)):
            found["results.latency_mean"] = mean / 1e6
        for name, percentile in PERCENTILES:
            value = values.get(f"result_{percentile}_percentile_latency_ns")
            if isinstance(value, (int, float)):
                found[f"results.{name}"] = value / 1e6
        qps = _first_number(values, "result_samples_per_second",
                            "result_completed_samples_per_sec")
        if qps is None:
            per_query = _first_number(values, "result_qps_with_loadgen_overhead")
            if per_query is None and isinstance(mean, (int, float)) and mean > 0:
                # MultiStream reports no rate: its queries run back to back.
                per_query = 1e9 / mean
            qps = per_query * samples_per_query if per_query is not None else None
        if qps is not None:
            found["results.qps"] = qps
        found.update(self._token_results())
        count = values.get("result_query_count")
        if isinstance(count, int):
            found["results.num_samples"] = count * samples_per_query
        if "result_validity" in values:
            found["results.loadgen_valid"] = values["result_validity"] == "VALID"
            if not found["results.loadgen_valid"]:
                found["results.loadgen_invalid_reasons"] = self.invalid_reasons()
        return found

    def _token_results(self) -> dict[str, Any]:
        """The token latencies (ms) and tokens per second, where the run measured them."""
        values = self.values
        found: dict[str, Any] = {}
        for name, mean_key, percentile_key in TOKEN_LATENCIES:
            mean = values.get(mean_key)
            if isinstance(mean, (int, float)) and not isinstance(mean, bool):
                found[f"results.{name}_mean"] = mean / 1e6
            for suffix, percentile in PERCENTILES:
                value = values.get(percentile_key.format(percentile))
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    found[f"results.{name}{suffix[len('latency'):]}"] = value / 1e6
        rate = _first_number(values, *TOKEN_RATES)
        if rate is not None:
            found["results.tokens_per_second"] = rate
        return found

    def invalid_reasons(self) -> list[str]:
        """Why LoadGen judged its run INVALID: each of its checks that failed, in words."""
        reasons = [reason for key, reason in INVALID_CHECKS if self.values.get(key) is False]
        if self.values.get("early_stopping_met") is False:
            for key, what in (("early_stopping_result", "early stopping"),
                              ("early_stopping_ttft_result", "early stopping (TTFT)"),
                              ("early_stopping_tpot_result", "early stopping (TPOT)")):
                detail = self.values.get(key)
                if isinstance(detail, str) and detail.strip():
                    reasons.append(f"{what}: {' '.join(detail.split())}")
        return reasons or [f"LoadGen's validity: {self.values.get('result_validity')}"]


def _first_number(values: dict[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = values.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None
