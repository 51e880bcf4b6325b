"""`--type efficiency`: a regular report's rows, and what each costs (docs/efficiency.md).

Columns: throughput, energy per sample (J), samples per joule, average power (W), achieved
TFLOPS, MFU and the allocator's peak GPU memory, all computed when the attempt was
summarised (dlbs/results/energy.py, efficiency.py). A sweep of batch size or dtype reads as
the most energy-efficient setting at a glance; its chart is throughput against power, one
point per row (`dlbs plot --preset efficiency` draws the same).
"""

from __future__ import annotations

from dataclasses import dataclass

from dlbs.report.kinds.regular import Regular
from dlbs.report.metrics import EFFICIENCY_COLUMNS


@dataclass(frozen=True)
class Efficiency(Regular):
    """The efficiency report (see the module): a regular report with its own values."""


KIND = Efficiency("efficiency", "Efficiency report",
                  lead_keys=("exp.model", "exp.seq_len", "exp.replica_batch",
                             "exp.effective_batch"),
                  default_metrics=EFFICIENCY_COLUMNS, chart="efficiency")
