"""`--type strong`: strong scaling, the same effective batch across GPU counts (scaled.py).

speedup = t1 / tN; efficiency = t1 / (N x tN), in percent.
"""

from __future__ import annotations

from dlbs.report.kinds.scaled import Scaling
from dlbs.report.scaling import strong_values

KIND = Scaling("strong", "Strong scaling (same effective batch)",
               lead_keys=("exp.model", "exp.seq_len", "exp.effective_batch"),
               values=strong_values,
               keeps="the effective batch", other="weak")
