"""Checks of a whole plan that no single experiment can make (`dlbs validate`, `dlbs run`)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dlbs.plan.builder import FRAMEWORK, Planner
from dlbs.plan.containment import LOG_DIR, LOG_FILE, RESULTS_DB, TRACE_FILE, WRITTEN
from dlbs.plan.repeated_flags import repeated_flags
from dlbs.plan.unused import unused_parameters

# Backends that run one process per replica and so cannot put several GPUs in one replica.
ONE_GPU_PER_REPLICA = ("pytorch", "mxnet")

#: How the whole sweep is run (configs/01-run.yaml): one value for every experiment.
SWEEP_WIDE = ("runtime.max_parallel", "slurm.max_in_flight", "slurm.on_interrupt")


class RunChecks:
    """What makes a plan unrunnable as a whole (docs/running.md), one experiment at a time.

    Whole-sweep settings that differ, several local experiments at once on the CPU, requests
    that conflict, two files that a run writes (logs, traces, results databases) in one
    place. `dlbs run --plan` uses it too (`run_problems`): a plan file is not checked by the
    planner.
    """

    def __init__(self) -> None:
        self.problems: list[str] = []
        self._first: dict[str, tuple[int, Any]] = {}
        #: Each file written so far (absolute): the first experiment and parameter to write it.
        self._files: dict[str, tuple[int, str]] = {}

    def add(self, index: int, experiment: dict[str, Any]) -> None:
        """Check experiment #`index` (counted from 1)."""
        found = self._shared_files(index, experiment)
        for name in SWEEP_WIDE:
            if name not in experiment:
                continue
            seen = self._first.setdefault(name, (index, experiment[name]))
            if seen[1] != experiment[name]:
                found.append(f"{name} applies to the whole sweep, but experiment #{seen[0]} "
                             f"has {seen[1]!r} and #{index} {experiment[name]!r}")
                self._first[name] = (index, experiment[name])  # say it once per change
        parallel = experiment.get("runtime.max_parallel") or 1
        if isinstance(parallel, int) and parallel > 1 and \
                experiment.get("exp.scheduler", "none") != "slurm" and \
                not experiment.get("exp.gpus"):
            found.append(f"experiment #{index} runs on the CPU, but runtime.max_parallel is "
                         f"{parallel}: experiments at once on one CPU disturb each other's "
                         "numbers (parallel runs need disjoint exp.gpus)")
        if experiment.get("exp.scheduler") == "slurm" and experiment.get("slurm.gres") and \
                experiment.get("slurm.gpus_per_node"):
            found.append(f"experiment #{index}: slurm.gres and slurm.gpus_per_node both "
                         "request GPUs; set slurm.gpus_per_node to 0 to use slurm.gres")
        if experiment.get("exp.docker") is True and \
                experiment.get("exp.container_engine") == "podman" and \
                experiment.get("exp.docker_launcher") == "nvidia-docker":
            found.append(f"experiment #{index}: exp.container_engine podman cannot run "
                         "exp.docker_launcher nvidia-docker (a Docker-only binary); use "
                         "docker (Podman gets GPUs through CDI)")
        self.problems += found


    def _shared_files(self, index: int, experiment: dict[str, Any]) -> list[str]:
        """One experiment's file that another one writes (or it writes twice): the problems.

        A results database may be shared by every experiment; nothing else may be shared,
        and no log or trace may be a database.
        """
        found = []
        for name, path in written_files(experiment):
            key = os.path.abspath(path)
            first = self._files.setdefault(key, (index, name))
            if first == (index, name) or (name == first[1] == RESULTS_DB):
                continue
            if first[1] == name:
                found.append(f"experiments #{first[0]} and #{index} write the same "
                             f"{WRITTEN[name]} {path!r}")
            else:
                # Said of the log or trace, not of a database that was there first.
                (owner, kind), (writer, wrong) = (first, (index, name)) \
                    if name != RESULTS_DB else ((index, name), first)
                whose = "its own" if owner == writer else f"experiment #{owner}'s"
                found.append(f"experiment #{writer} writes its {WRITTEN[wrong]} ({wrong}) to "
                             f"{whose} {WRITTEN[kind]} {path!r}")
        return found


def written_files(experiment: dict[str, Any]) -> list[tuple[str, str]]:
    """(parameter, path) of each file a run of `experiment` writes.

    Its log, its trace (when it traces) and its results database (`runtime.results_db`, else
    `results.db` in `exp.log_dir`).
    """
    found = []
    log_file = experiment.get(LOG_FILE)
    if isinstance(log_file, str) and log_file:
        found.append((LOG_FILE, log_file))
    trace_file = experiment.get(TRACE_FILE)
    if isinstance(trace_file, str) and trace_file and \
            str(experiment.get("exp.trace_level") or "none") != "none":
        found.append((TRACE_FILE, trace_file))
    database = experiment.get(RESULTS_DB) or (
        os.path.join(experiment[LOG_DIR], "results.db")
        if isinstance(experiment.get(LOG_DIR), str) else None)
    if isinstance(database, str) and database:
        found.append((RESULTS_DB, database))
    return found


def run_problems(experiments: Iterable[dict[str, Any]]) -> list[str]:
    """`RunChecks` of a whole plan."""
    checks = RunChecks()
    for index, experiment in enumerate(experiments, start=1):
        checks.add(index, experiment)
    return checks.problems


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
    half_without_tensor_cores: Counter[str] = Counter()
    with_model_opts = 0
    run_checks = RunChecks()
    for index, experiment in enumerate(
            planner.experiments() if experiments is None else experiments, start=1):
        report.experiments += 1
        run_checks.add(index, experiment)
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
        if str(experiment.get("exp.model_opts", "{}")).replace(" ", "") not in ("", "{}"):
            with_model_opts += 1
    for dtype, count in sorted(half_without_tensor_cores.items()):
        report.warnings.append(
            f"exp.use_tensor_core is false in {count} PyTorch {dtype} experiments: PyTorch "
            f"can only switch TF32 off (float32 math); {dtype} math still uses tensor cores")
    if with_model_opts:
        report.warnings.append(
            f"exp.model_opts is set in {with_model_opts} experiments, but no backend of dlbs "
            f"reads model options (DLBS's MXNet backend did): it is only recorded, and "
            f"experiments that differ only in it are one experiment")
    report.problems += run_checks.problems
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
