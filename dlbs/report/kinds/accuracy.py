"""`--type accuracy`: the accuracy scenario (docs/evaluation.md).

One row per experiment, led by the model, framework and weights file; top-1, top-5 and the
samples classified.
"""

from __future__ import annotations

from dlbs.report.kinds.base import ReportKind

KIND = ReportKind("accuracy", "Accuracy report",
                  lead_keys=("exp.model", "exp.framework", "exp.weights"),
                  default_metrics=("results.top1", "results.top5", "results.num_samples"),
                  scenarios=("accuracy",))
