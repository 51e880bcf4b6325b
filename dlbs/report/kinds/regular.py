"""`--type regular`: one row per experiment, its batch time and throughput.

Rows are led by the model and the batch sizes (and the GPU count when it varies: it reads
better than the effective batch it makes); `--baseline` adds each row's speedup over its
baseline row (baseline.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dlbs.report.keys import ValuesOf
from dlbs.report.kinds.base import ReportKind


@dataclass(frozen=True)
class Regular(ReportKind):
    """The regular report (see the module)."""

    def leading(self, varying: Sequence[str], values_of: ValuesOf) -> list[str]:
        lead = super().leading(varying, values_of)
        if "exp.num_gpus" in varying:
            lead.append("exp.num_gpus")
        return lead


KIND = Regular("regular", "Regular report",
               lead_keys=("exp.model", "exp.replica_batch", "exp.effective_batch"),
               accepts_baseline=True)
