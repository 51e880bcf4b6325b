"""`dlbs run`: run every experiment of a spec (or of a plan file) and summarise."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import orjson

from dlbs.cli.spec_options import add_spec_arguments, spec_file, spec_from_args
from dlbs.errors import ConfigError
from dlbs.util.credentials import masked
from dlbs.util.terminal import one_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_spec_arguments(parser)
    parser.add_argument("--plan", metavar="FILE",
                        help="run a plan written by `dlbs plan -o FILE` (json or jsonl)")
    parser.add_argument("--dry-run", action="store_true",
                        help="show what would run (a table and a summary); run nothing")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="--dry-run output: a table for people (default), or one JSON "
                             "object per experiment with its exact request")
    parser.add_argument("--progress", choices=("auto", "bar", "lines"), default="auto",
                        help="a progress bar (auto: when stderr is a terminal) or a line each")


def load_plan(path: str) -> list[dict[str, Any]]:
    """A plan file, checked as the planner checks its own output (dlbs/plan/plan_file.py)."""
    from dlbs.plan.plan_file import read_plan

    return read_plan(path)


def run(args: argparse.Namespace) -> int:
    from dlbs.plan.builder import Planner
    from dlbs.plan.checks import check_plan
    from dlbs.run.loop import Sweep

    if args.plan:
        if spec_file(args) or args.params or args.variables or args.extensions:
            raise ConfigError("--plan runs a plan as it was written; give the spec options "
                              "to `dlbs plan` instead")
        experiments = load_plan(args.plan)
    else:
        planner = Planner(spec_from_args(args))
        experiments = list(planner.experiments())
        report = check_plan(planner, experiments)
        for warning in report.warnings:
            print(f"dlbs: warning: {one_line(warning)}", file=sys.stderr)
        if report.problems:
            raise ConfigError(f"the plan is not valid: {report.problems[0]}",
                              hint="`dlbs validate` lists every problem")
    sweep = Sweep(experiments, _reporter(args.progress, _Terminal(sys.stderr)))
    if args.dry_run:
        previews = sweep.preview()
        for warning in sweep.warnings:
            print(f"dlbs: warning: {one_line(warning)}", file=sys.stderr)
        _print_preview(previews, args.format)
        return 0
    try:
        summary = sweep.run()
    finally:
        sweep.reporter.close()
    _print_summary(summary, sweep.reporter.stream)
    if sweep.reporter.stream.gone:  # nothing can be said any more; exit with the status
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the rest of the process
    return summary.exit_status


def _print_preview(previews: list[Any], output_format: str) -> None:
    """`--dry-run`: the exact requests as JSON lines, or a table and a summary line."""
    from dlbs.run.recording import FAILED_EARLIER

    if output_format == "json":
        for preview in previews:
            experiment = preview.experiment
            record = {"exp.id": experiment.get("exp.id"),
                      "exp.log_file": experiment.get("exp.log_file"),
                      "action": preview.action, "reason": preview.reason or None,
                      **(preview.request or {})}
            # The sweep left the store's password out of its experiments; a request that
            # quotes a URL of its own loses its password here (docs/security.md).
            sys.stdout.buffer.write(orjson.dumps(masked(record)) + b"\n")
        return
    from dlbs.plan.writers import aligned_table

    # Plain columns, not a rich table: a plan may have 100,000 experiments.
    rows = [[one_line(str(value)) for value in (
        experiment.get("exp.id"), preview.action, (preview.request or {}).get("target", ""),
        experiment.get("exp.framework"), experiment.get("exp.model"),
        experiment.get("exp.replica_batch"), experiment.get("exp.gpus") or "cpu",
        experiment.get("exp.log_file"))]
        for preview in previews for experiment in (preview.experiment,)]
    if rows:
        sys.stdout.write(aligned_table(("id", "action", "target", "framework", "model",
                                        "batch", "GPUs", "log file"), rows, rule=False))
    counts = {action: sum(1 for p in previews if p.action == action)
              for action in ("run", "simulate", "done", "skip", "disabled", "fail",
                             FAILED_EARLIER)}
    failing = f", {counts['fail']} to fail (missing on this host)" if counts["fail"] else ""
    if counts[FAILED_EARLIER]:
        failing += (f", {counts[FAILED_EARLIER]} {FAILED_EARLIER} (not run again: "
                    "exp.rerun=onfail retries them)")
    print(f"dlbs: {len(previews)} experiments: {counts['run']} to run, "
          f"{counts['done']} already done, {counts['skip']} to skip, "
          f"{counts['disabled']} disabled, {counts['simulate']} to simulate{failing} "
          f"(--format json shows each exact request)")


class _Terminal:
    """Standard error that may go away mid-sweep, and the sweep must go on stopping cleanly.

    When the terminal closes (SIGHUP), writes to it fail (EIO): they are dropped from then
    on (`gone`), so that the sweep still stops its experiments and records every attempt.
    """

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self.stream.write(text)
            except (OSError, ValueError):
                self.gone = True
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except (OSError, ValueError):
                self.gone = True

    def isatty(self) -> bool:
        try:
            return bool(self.stream.isatty())
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"


def _reporter(mode: str, stream: _Terminal) -> Any:
    if mode == "bar" or (mode == "auto" and stream.isatty()):
        return BarReporter(stream)
    return LineReporter(stream)


def _run_as(experiment: dict[str, Any]) -> str:
    """The scenario and the batch as run: `single_stream batch 1`, `batch 16 x4`.

    The benchmark loop's batch is the replica batch times the replicas; a scenario's is
    `exp.run_batch`, the batch its queries run at (single_stream: 1). A plan written before
    `exp.run_batch` existed shows the replica batch.
    """
    scenario = experiment.get("exp.scenario") or "benchmark"
    if scenario == "benchmark" or experiment.get("exp.run_batch") is None:
        batch = f"batch {experiment.get('exp.replica_batch')} x{experiment.get('exp.num_replicas')}"
    else:
        batch = f"batch {experiment.get('exp.run_batch')}"
    return batch if scenario == "benchmark" else f"{scenario} {batch}"


def _label(experiment: dict[str, Any]) -> str:
    """The progress bar's label: `resnet50 single_stream batch 1`."""
    return f"{experiment.get('exp.model')} {_run_as(experiment)}"


def _describe(experiment: dict[str, Any]) -> str:
    return one_line(f"{experiment.get('exp.framework')} {experiment.get('exp.model')} "
                    f"{experiment.get('exp.phase')} {experiment.get('exp.dtype')} "
                    f"{_run_as(experiment)} [{experiment.get('exp.id')}]")


def _shown(value: Any) -> str:
    """A value in a rich line: no terminal escapes, no rich markup."""
    from rich.markup import escape

    return escape(one_line(str(value)))


class LineReporter:
    """A line per experiment on stderr: for logs, CI and pipes."""

    def __init__(self, stream: _Terminal | None = None) -> None:
        self.stream = stream or _Terminal(sys.stderr)
        self.total = 0
        self.done = 0

    def planned(self, total: int) -> None:
        self.total = total

    def started(self, experiment: dict[str, Any], log_path: str) -> None:
        pass

    def finished(self, experiment: dict[str, Any], status: str, message: str | None,
                 log_path: str | None, seconds: float) -> None:
        self.done += 1
        detail = f" ({one_line(message)})" if message and status != "unchanged" else ""
        where = f" {one_line(log_path)}" if log_path else ""
        print(f"[{self.done}/{self.total}] {status:11} {_describe(experiment)} "
              f"{seconds:.1f}s{where}{detail}", file=self.stream, flush=True)

    def note(self, text: str) -> None:
        print(f"dlbs: {one_line(text)}", file=self.stream, flush=True)

    def progress(self, experiment: dict[str, Any], text: str) -> None:
        """A running experiment's progress note (a max_qps trial, say)."""
        blank = " " * len(f"[{self.done}/{self.total}]")  # it has no place in the count yet
        print(f"{blank} {'running':11} {_describe(experiment)}: {one_line(text)}",
              file=self.stream, flush=True)

    def close(self) -> None:
        pass


class BarReporter(LineReporter):
    """A rich progress bar: done, failed, skipped, left and the ETA."""

    def __init__(self, stream: _Terminal | None = None) -> None:
        super().__init__(stream)
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = Console(file=self.stream)
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TextColumn("{task.fields[counts]}"),
                            TimeElapsedColumn(), TimeRemainingColumn(),
                            console=self.console, transient=False)
        self.counts = {"ok": 0, "failed": 0, "skipped": 0}
        self.task = None

    def _fields(self) -> str:
        return " ".join(f"{k} {v}" for k, v in self.counts.items())

    def planned(self, total: int) -> None:
        super().planned(total)
        self.bar.start()
        self.task = self.bar.add_task("dlbs run", total=total, counts=self._fields())

    def started(self, experiment: dict[str, Any], log_path: str) -> None:
        self.bar.update(self.task, description=_shown(_label(experiment)))

    def finished(self, experiment: dict[str, Any], status: str, message: str | None,
                 log_path: str | None, seconds: float) -> None:
        key = "ok" if status in ("ok", "unchanged") else (
            "skipped" if status == "skipped" else "failed")
        self.counts[key] += 1
        if key == "failed":
            self.console.print(_shown(f"{status}: {_describe(experiment)}: {message} "
                                      f"({log_path})"))
        self.bar.update(self.task, advance=1, counts=self._fields())

    def note(self, text: str) -> None:
        self.console.print(_shown(f"dlbs: {text}"))

    def progress(self, experiment: dict[str, Any], text: str) -> None:
        """A running experiment's progress note: a line above the bar."""
        self.console.print(one_line(f"{_label(experiment)}: {text}"), markup=False,
                           highlight=False)

    def close(self) -> None:
        if self.task is not None:
            self.bar.stop()


def _print_summary(summary: Any, stream: _Terminal) -> None:
    counts = ", ".join(f"{n} {status}" for status, n in sorted(summary.counts.items()))
    stopped = ""
    if summary.interrupted:
        stopped = f" (interrupted by {summary.stopped_by})" if summary.stopped_by \
            else " (interrupted)"
    print(f"dlbs: {counts or 'nothing to run'}{stopped}", file=stream)
    for experiment, status, message, log_path in summary.failures:
        where = f" (log: {log_path})" if log_path else ""  # none: it was not started
        print(one_line(f"  {status}: {_describe(experiment)}: {message}{where}"), file=stream)
    from dlbs.run.recording import FAILED_EARLIER

    earlier = summary.counts.get(FAILED_EARLIER, 0)
    if earlier:
        print(f"dlbs: {earlier} experiment{'s' if earlier > 1 else ''} failed in an earlier run "
              "and measured nothing now; -P exp.rerun=onfail runs "
              f"{'them' if earlier > 1 else 'it'} again (dlbs report shows the failures)",
              file=stream)
