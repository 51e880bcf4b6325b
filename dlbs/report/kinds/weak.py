"""`--type weak`: weak scaling, the same replica batch across GPU counts (scaled.py).

speedup = throughput(N) / throughput(1); efficiency = t1 / tN, in percent.
"""

from __future__ import annotations

from dlbs.report.kinds.scaled import Scaling
from dlbs.report.scaling import weak_values

KIND = Scaling("weak", "Weak scaling (same replica batch)",
               lead_keys=("exp.model", "exp.seq_len", "exp.replica_batch"), values=weak_values,
               keeps="the replica batch", other="strong")
