"""`--type regular`: one row per experiment, its batch time and throughput.

Rows are led by the model and the batch sizes (and the GPU count when it varies: it reads
better than the effective batch it makes); `--baseline` adds each row's speedup over its
baseline row (baseline.py). Without `--columns`, tokens per second (and per GPU), energy per
sample and MFU stand beside the throughput where some experiment shown has them
(docs/efficiency.md, docs/transformers.md); a transformer's rows name its sequence length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dlbs.report.keys import ValuesOf
from dlbs.report.kinds.base import ReportKind
from dlbs.report.metrics import REGULAR_EXTRAS, Metric, has_values, metric
from dlbs.report.options import Options
from dlbs.results.columns import Attempts


@dataclass(frozen=True)
class Regular(ReportKind):
    """The regular report (see the module)."""

    # Values added to the defaults where some experiment shown has them.
    extras: tuple[str, ...] = ()

    def metrics(self, options: Options, attempts: Attempts, rows: np.ndarray) -> list[Metric]:
        found = super().metrics(options, attempts, rows)
        if options.columns or options.baseline:
            return found
        shown = {item.key for item in found}
        return found + [metric(key) for key in self.extras if key not in shown
                        and has_values(attempts, key)[rows].any()]

    def leading(self, varying: Sequence[str], values_of: ValuesOf) -> list[str]:
        lead = super().leading(varying, values_of)
        if "exp.num_gpus" in varying:
            lead.append("exp.num_gpus")
        return lead


KIND = Regular("regular", "Regular report",
               lead_keys=("exp.model", "exp.seq_len", "exp.replica_batch",
                          "exp.effective_batch"),
               accepts_baseline=True, extras=REGULAR_EXTRAS)
