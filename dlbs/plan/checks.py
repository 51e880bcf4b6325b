"""Checks of a whole plan that no single experiment can make (`dlbs validate`, `dlbs run`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dlbs.plan.builder import FRAMEWORK, Planner
from dlbs.plan.repeated_flags import repeated_flags
from dlbs.plan.unused import unused_parameters

# Backends that run one process per replica and so cannot put several GPUs in one replica.
ONE_GPU_PER_REPLICA = ("pytorch", "mxnet")


@dataclass
class PlanReport:
    """What validation found: problems make the plan unusable, warnings do not."""

    experiments: int = 0
    duplicates: int = 0
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def check_plan(planner: Planner, experiments: Iterable[dict[str, Any]] | None = None,
               injected_env: Iterable[str] = ("DLBS_ROOT",)) -> PlanReport:
    """Build (or take) the plan and check it as a whole."""
    report = PlanReport(warnings=unused_parameters(planner.spec))
    log_files: dict[str, int] = {}
    half_without_tensor_cores: Counter[str] = Counter()
    for index, experiment in enumerate(
            planner.experiments() if experiments is None else experiments, start=1):
        report.experiments += 1
        log_file = experiment.get("exp.log_file")
        if isinstance(log_file, str) and log_file:
            first = log_files.setdefault(log_file, index)
            if first != index:
                report.problems.append(
                    f"experiments #{first} and #{index} write the same log file {log_file!r}")
        framework = experiment.get(FRAMEWORK)
        if isinstance(framework, str):
            template = planner.params.get(f"{framework}.args")
            for message in repeated_flags(experiment, framework,
                                          template.value if template is not None else None):
                report.problems.append(f"experiment #{index}: {message}")
        gpus = experiment.get("exp.gpus")
        if framework in ONE_GPU_PER_REPLICA and isinstance(gpus, str) and ":" in gpus:
            report.problems.append(
                f"experiment #{index}: exp.gpus={gpus!r} puts several GPUs in one replica "
                f"(':'), which {framework} does not support; use ',' between GPUs")
        if framework == "pytorch" and experiment.get("pytorch.data_loader_only") is True and \
                not experiment.get("exp.data_dir"):
            report.problems.append(
                f"experiment #{index}: pytorch.data_loader_only times the data loader, but "
                f"exp.data_dir is empty (synthetic data has no loader)")
        if framework == "pytorch" and experiment.get("exp.use_tensor_core") is False and \
                experiment.get("exp.device_type") == "gpu" and \
                experiment.get("exp.dtype") in ("float16", "bfloat16"):
            half_without_tensor_cores[str(experiment["exp.dtype"])] += 1
    for dtype, count in sorted(half_without_tensor_cores.items()):
        report.warnings.append(
            f"exp.use_tensor_core is false in {count} PyTorch {dtype} experiments: PyTorch "
            f"can only switch TF32 off (float32 math); {dtype} math still uses tensor cores")
    report.duplicates = planner.duplicates
    if report.experiments == 0:
        axes = [axis.name for axis in planner.axes if not axis.items]
        report.problems.append("the plan is empty" + (
            f": variable {', '.join(map(repr, axes))} has no values" if axes else ""))
    if report.duplicates:
        report.warnings.append(f"{report.duplicates} identical experiments were merged "
                               f"(same exp.id)")
    env_vars = {name: sorted(set(names) - set(injected_env))
                for name, names in planner.ctx.env_used.items()}
    for name, names in sorted(env_vars.items()):
        if names:
            report.warnings.append(f"parameter {name!r} takes a value from the environment "
                                   f"({', '.join(names)}): other machines may differ")
    return report
