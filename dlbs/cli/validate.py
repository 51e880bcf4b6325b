"""`dlbs validate`: resolve and check a spec's plan without running anything."""

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


def run(args: argparse.Namespace) -> int:
    planner = Planner(spec_from_args(args))
    host_access = HostAccessWatch()
    report = check_plan(planner, host_access.watch(planner.experiments()))
    print(f"plan: {report.experiments} experiments")
    for warning in report.warnings + host_access.warnings():
        print(f"dlbs: warning: {one_line(warning)}", file=sys.stderr)
    for problem in report.problems:
        print(f"problem: {one_line(problem)}")
    if report.problems:
        count = len(report.problems)
        raise PlanError(f"the plan is not valid: {report.problems[0]}" +
                        (f" (and {count - 1} more problems above)" if count > 1 else ""))
    print("ok")
    return 0
