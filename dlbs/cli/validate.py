"""`dlbs validate`: resolve and check a spec's plan without running anything.

The plan is checked as a whole (dlbs/plan/checks.py) and, unless `--plan-only`, against the
host it will run on: each experiment's input files and GPUs where it runs, this host for bare
metal and local containers (dlbs/run/host_check.py); what runs elsewhere (SLURM) is said to
be unchecked.
"""

from __future__ import annotations

import argparse
import sys

from dlbs.cli.spec_options import add_spec_arguments, spec_from_args
from dlbs.errors import PlanError
from dlbs.plan.builder import Planner
from dlbs.plan.checks import check_plan
from dlbs.recipes.host_access import HostAccessWatch
from dlbs.util.terminal import one_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_spec_arguments(parser)
    parser.add_argument("--plan-only", action="store_true",
                        help="check the plan alone, not this host's input files and GPUs "
                             "(for a plan that runs on another machine)")


def run(args: argparse.Namespace) -> int:
    from dlbs.run.host_check import HostCheck

    planner = Planner(spec_from_args(args))
    host_access = HostAccessWatch()
    experiments = host_access.watch(planner.experiments())
    host = None if args.plan_only else HostCheck()
    report = check_plan(planner, host.watch(experiments) if host else experiments)
    print(f"plan: {report.experiments} experiments")
    for warning in report.warnings + host_access.warnings():
        print(f"dlbs: warning: {one_line(warning)}", file=sys.stderr)
    problems = report.problems + (host.problems if host else [])
    for problem in problems:
        print(f"problem: {one_line(problem)}")
    for note in host.notes() if host else []:
        print(f"note: {one_line(note)}")
    if problems:
        count = len(problems)
        raise PlanError(f"the plan is not valid: {problems[0]}" +
                        (f" (and {count - 1} more problems above)" if count > 1 else ""))
    print("ok")
    return 0
