"""The `slurm` target: batch jobs, submitted with sbatch, one per experiment or as an array.

The job script comes from the Jinja2 template `dlbs/run/templates/sbatch.sh.j2` (a job
array's from `sbatch_array.sh.j2`) and is written beside the experiment's log
(`<log>.sbatch`), so that a user can read it and submit it again by hand. The job appends its
output to the log. It runs `slurm.prologue` (the user's shell lines, on purpose), then `srun`
starts the invocation once per task (`Invocation.nodes` x `Invocation.tasks_per_node`); each
task gets RANK, WORLD_SIZE, LOCAL_RANK and NODE_RANK from SLURM, and the job exports
MASTER_ADDR (the first node's address) and MASTER_PORT for the frameworks' rendezvous. Beside
the benchmark, the first task of every node starts the node monitor
(`dlbs.monitor.node`, written beside the script as a zipapp that needs no dlbs on the node),
which writes the node's environment and resource series for the run loop.

It implements the scheduler interface (`dlbs.run.targets.scheduler`): experiments with equal
requests go as one job array (`groups`, `submit_many`); many jobs are looked at with one
`squeue` (`poll`); a job's final record comes from `scontrol show job` (sacct only as a
fallback: it needs accounting storage, which many small clusters and the test cluster lack;
the controller keeps finished jobs for MinJobAge seconds). Failed, cancelled and timed-out
jobs are reported with SLURM's state, reason and exit code. Every submission carries a job
name unique to it, so that a run loop killed between sbatch's answer and its own
bookkeeping can still find the job (`find_submitted`).
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import stat
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dlbs.errors import LaunchError
from dlbs.monitor.bundle import write_node_monitor
from dlbs.monitor.node import NODE_FILE_SUFFIX
from dlbs.monitor.sampling import TAG_VARIABLE
from dlbs.recipes.container import cli_argv
from dlbs.recipes.invocation import BatchRequest, Invocation
from dlbs.run.flight import follow
from dlbs.run.outcome import CANCELLED, FAILURE, OK, TIMEOUT, Outcome
from dlbs.run.targets.base import register_target
from dlbs.run.targets.process import signal_name
from dlbs.run.targets.scheduler import JobState, SchedulerTarget, SubmitLimit
from dlbs.util.atomic import atomic_write
from dlbs.util.credentials import benchmark_environment

try:
    import jinja2
except ImportError as _error:
    _MISSING: str | None = f"Jinja2 is missing ({_error}); install it with: pip install Jinja2"
else:
    _MISSING = None

TEMPLATE = "sbatch.sh.j2"
ARRAY_TEMPLATE = "sbatch_array.sh.j2"
TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"
COMMANDS = ("sbatch", "scontrol", "scancel", "squeue")

#: What each task runs (`sh -c`, the command as "$@"): its ranks from SLURM's per-task
#: variables and the node monitor's tag; on a node's first task, the node monitor in the
#: background (when python3 is there). Without sampling or the energy at the marks it ends
#: by itself once it wrote the node's environment; with either it is stopped with SIGTERM
#: once the benchmark has ended and the monitor is ready for it (its file exists: its signal
#: handlers are in place).
TASK_SCRIPT = (
    'export RANK="$SLURM_PROCID" WORLD_SIZE="$SLURM_NTASKS" LOCAL_RANK="$SLURM_LOCALID" '
    'NODE_RANK="$SLURM_NODEID" PET_NODE_RANK="$SLURM_NODEID" '
    f'{TAG_VARIABLE}="$dlbs_tag.$SLURMD_NODENAME"; '
    f'dlbs_node_file="$dlbs_log.$SLURMD_NODENAME{NODE_FILE_SUFFIX}"; '
    'if [ "$SLURM_LOCALID" = 0 ] && command -v python3 >/dev/null 2>&1; then '
    f'{TAG_VARIABLE}= python3 "$dlbs_node_monitor" --out "$dlbs_node_file" '
    f'--node "$SLURMD_NODENAME" --tag "${TAG_VARIABLE}" '
    '--frequency "$dlbs_frequency" --energy "$dlbs_energy" --gpus "$dlbs_gpus" '
    '--log "$dlbs_log" & dlbs_monitor=$!; '
    'fi; '
    '"$@"; dlbs_status=$?; '
    'if [ -n "${dlbs_monitor:-}" ] && { [ "$dlbs_frequency" != 0 ] || '
    '[ "$dlbs_energy" = 1 ]; }; then dlbs_i=0; '
    'while [ ! -e "$dlbs_node_file" ] && [ $dlbs_i -lt 200 ] && kill -0 "$dlbs_monitor" '
    '2>/dev/null; do sleep 0.05; dlbs_i=$((dlbs_i + 1)); done; '
    'kill -TERM "$dlbs_monitor" 2>/dev/null; fi; '
    'if [ -n "${dlbs_monitor:-}" ]; then wait "$dlbs_monitor"; fi; '
    'exit "$dlbs_status"')

#: What each task learns from the job and passes on into a container.
TASK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT",
                  "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NNODES",
                  TAG_VARIABLE)

#: What sbatch says when a submit limit (of the user, the account or the QOS) is reached;
#: such a refusal is a `SubmitLimit`, to retry once some jobs have ended.
SUBMIT_LIMIT = re.compile(
    r"submit limit|MaxSubmitJob|QOSMaxSubmit|AssocMaxSubmit|job count limit|"
    r"temporarily unable to accept|Resource temporarily unavailable", re.IGNORECASE)
#: The most experiments one job array takes (SLURM's default MaxArraySize is 1001).
MAX_ARRAY = 1000

#: Final job states -> outcome status. Anything else (PENDING, RUNNING, COMPLETING, ...)
#: means the job is not done yet.
FINAL_STATES = {
    "COMPLETED": OK,
    "FAILED": FAILURE,
    "OUT_OF_MEMORY": FAILURE,
    "NODE_FAIL": FAILURE,
    "BOOT_FAIL": FAILURE,
    "SPECIAL_EXIT": FAILURE,
    "CANCELLED": CANCELLED,
    "PREEMPTED": CANCELLED,
    "REVOKED": CANCELLED,
    "TIMEOUT": TIMEOUT,
    "DEADLINE": TIMEOUT,
}

#: Reasons a pending job gives when the cluster, as configured, can never run it.
HOPELESS_REASONS = frozenset({
    "PartitionNodeLimit", "PartitionTimeLimit", "PartitionConfig", "BadConstraints",
    "InvalidAccount", "InvalidQOS", "DependencyNeverSatisfied",
})

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: A job id, or an array task's (`<array id>_<index>`).
_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")
#: The first lines of a job script of one experiment (sbatch.sh.j2).
_SINGLE_HEADER = re.compile(r"\A#!/bin/bash\n# Written by dlbs for experiment (.*)\.$",
                            re.MULTILINE)
#: The most of a job script read to find its experiment (a job array of 1,000).
SCRIPT_LIMIT = 64 << 20
_FIELD_SPLIT = re.compile(r" (?=[A-Za-z][A-Za-z0-9_:/]*=)")


def _sbatch_value(value: object) -> str:
    """A value for an `#SBATCH` line: quoted when it has blanks; refused if it can't be."""
    text = str(value)
    if "\n" in text or '"' in text:
        raise LaunchError(f"cannot put {text!r} in an sbatch directive (newline or double "
                          "quote)", hint="rename the path or value")
    return f'"{text}"' if any(c.isspace() for c in text) or not text else text


def _sbatch_output(path: object) -> str:
    """The log path for `--output`: `%` is a file-name pattern there, so it is doubled."""
    return _sbatch_value(str(path).replace("%", "%%"))


def _one_line(value: object) -> str:
    return " ".join(str(value).split())


@functools.cache
def _environment() -> Any:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
                             undefined=jinja2.StrictUndefined, autoescape=False,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(shquote=lambda v: shlex.quote(str(v)), sbatch_value=_sbatch_value,
                       sbatch_output=_sbatch_output, oneline=_one_line)
    return env


def _seconds(text: str) -> float:
    """SLURM's `[D-]HH:MM:SS` (or MM:SS) as seconds; 0 for anything else."""
    days, _, clock = text.rpartition("-")
    try:
        parts = [int(p) for p in clock.split(":")]
        seconds = 0
        for part in parts:
            seconds = seconds * 60 + part
        return seconds + (int(days) * 86400 if days else 0)
    except ValueError:
        return 0.0


def parse_job_record(text: str) -> dict[str, str]:
    """`scontrol show job -o` output (one line of KEY=VALUE; values may hold blanks)."""
    fields: dict[str, str] = {}
    for item in _FIELD_SPLIT.split(text.strip()):
        key, sep, value = item.partition("=")
        if sep:
            fields[key] = value
    return fields


def _job_state(state: str, reason: str, run_seconds: float) -> JobState:
    """What one look of `squeue` says of a job, in the interface's terms."""
    return JobState(state, reason, run_seconds, queued=state == "PENDING",
                    running=state == "RUNNING", final=state in FINAL_STATES,
                    hopeless=state == "PENDING" and reason in HOPELESS_REASONS)


def _run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a SLURM command, in its own session.

    A Ctrl-C or a hang-up of the terminal reaches dlbs alone, which decides what to do: an
    sbatch killed half-way may have submitted a job that nobody then knows of.
    """
    try:
        # sbatch exports its environment to the job: never the results store's credentials.
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, start_new_session=True,
                              env=benchmark_environment())
    except FileNotFoundError:
        raise LaunchError(f"{argv[0]} not found on PATH",
                          hint="run dlbs on a SLURM login node, or install the SLURM client "
                               "commands") from None
    except subprocess.TimeoutExpired:
        raise LaunchError(f"{' '.join(argv)} did not answer within {timeout:g} s",
                          hint="is slurmctld up? try: scontrol ping") from None


@register_target("slurm", unavailable=_MISSING)
class SlurmTarget(SchedulerTarget):
    """Batch jobs of a SLURM cluster; see the module doc."""

    summary = "SLURM batch jobs, many in flight, arrays where requests agree (sbatch, srun)"
    display_name = "SLURM"
    job_word = "SLURM job"

    def __init__(self) -> None:
        self._monitor_written: set[str] = set()

    # -- the request -------------------------------------------------------------------

    @staticmethod
    def command(invocation: Invocation) -> list[str]:
        """What each task runs: the invocation's argv, or a `docker run` of it.

        Every task starts its own container, so dlbs names none (they would collide), and
        each passes its rank and the rendezvous into its container.
        """
        if invocation.container is not None:
            return cli_argv(invocation, named=False, pass_env=TASK_VARIABLES)
        return list(invocation.argv)

    @staticmethod
    def _batch(invocation: Invocation) -> BatchRequest:
        if invocation.batch is None:
            raise LaunchError(f"experiment {invocation.label}: no SLURM request (its "
                              "invocation was not built for the slurm target)")
        return invocation.batch

    def _header(self, invocation: Invocation) -> dict[str, Any]:
        """The sbatch request of one experiment (what experiments of one array share)."""
        batch = self._batch(invocation)
        return {"nodes": batch.nodes, "ntasks_per_node": batch.ntasks_per_node,
                "partition": batch.partition, "account": batch.account, "time": batch.time,
                "gpus_per_node": batch.gpus_per_node or "", "extra_args": batch.extra_args,
                "cpus_per_task": batch.cpus_per_task or "", "mem": batch.mem,
                "gres": batch.gres, "qos": batch.qos, "exclusive": batch.exclusive,
                "prologue": batch.prologue}

    def _task(self, invocation: Invocation, log_path: str) -> dict[str, Any]:
        """One experiment's part of a job script: environment, command, log, folder."""
        label = invocation.label
        for name in invocation.env:
            if not _ENV_NAME.match(name):
                raise LaunchError(f"experiment {label}: {name!r} is not a valid environment "
                                  "variable name")
        if not invocation.argv:
            raise LaunchError(f"experiment {label}: the recipe gave no command to run")
        return {"exp_id": _one_line(label), "env": dict(invocation.env),
                "argv": self.command(invocation),
                "srun_nodes": invocation.nodes, "tasks_per_node": invocation.tasks_per_node,
                "log": os.path.abspath(log_path),
                "workdir": os.path.abspath(invocation.workdir or os.getcwd()),
                "frequency": f"{invocation.monitor_frequency:g}",
                "energy": "1" if invocation.monitor_energy else "0",
                "gpus": ",".join(invocation.gpus)}

    def script(self, invocation: Invocation, log_path: str, script_path: str,
               name: str | None = None) -> str:
        """The job script's text; `name` is the job's name (default: from the label)."""
        header = self._header(invocation)
        task = self._task(invocation, log_path)
        resubmit = " ".join(shlex.quote(t) for t in ["sbatch", *header["extra_args"],
                                                     script_path])
        job_name = name or "dlbs-" + _one_line(invocation.label or Path(log_path).stem)
        return _environment().get_template(TEMPLATE).render(
            header, task=task, exp_id=task["exp_id"], resubmit=resubmit, job_name=job_name,
            output=task["log"], workdir=task["workdir"], task_script=TASK_SCRIPT,
            node_monitor=self._node_monitor_path(script_path), node_suffix=NODE_FILE_SUFFIX)

    @staticmethod
    def _node_monitor_path(script_path: str) -> str:
        return os.path.join(os.path.dirname(os.path.abspath(script_path)),
                            "dlbs-node-monitor.pyz")

    def array_script(self, entries: Sequence[tuple[Invocation, str]], script_path: str,
                     name: str | None = None) -> str:
        """The script of a job array: task i runs entry i (invocation, log path)."""
        if not entries:
            raise LaunchError("a job array needs at least one experiment")
        first = entries[0][0]
        header = self._header(first)
        for invocation, _ in entries[1:]:
            other = self._header(invocation)
            if other != header:
                differ = ", ".join(sorted(k for k in header if header[k] != other[k]))
                raise LaunchError(
                    f"experiments {first.label} and {invocation.label} cannot share a job "
                    f"array: their requests differ in {differ}",
                    hint="submit them as separate jobs")
        tasks = [self._task(*entry) for entry in entries]
        resubmit = " ".join(shlex.quote(t) for t in ["sbatch", *header["extra_args"],
                                                     script_path])
        return _environment().get_template(ARRAY_TEMPLATE).render(
            header, tasks=tasks, resubmit=resubmit,
            job_name=name or "dlbs-array-" + tasks[0]["exp_id"], output="/dev/null",
            workdir=tasks[0]["workdir"], task_script=TASK_SCRIPT,
            node_monitor=self._node_monitor_path(script_path), node_suffix=NODE_FILE_SUFFIX)

    def describe(self, invocation: Invocation) -> dict[str, Any]:
        """The sbatch command line and the script it would submit."""
        log_path = invocation.log_file or "experiment.log"
        script_path = os.path.abspath(log_path) + ".sbatch"
        return {"target": self.name,
                "sbatch": ["sbatch", "--parsable", *self._batch(invocation).extra_args,
                           script_path],
                "script": self.script(invocation, log_path, script_path)}

    # -- checks before the sweep -------------------------------------------------------

    def preflight(self, invocations: Sequence[Invocation]) -> None:
        """The SLURM commands, the controller, the partitions."""
        if not invocations:
            return
        for command in COMMANDS:
            if shutil.which(command) is None:
                raise LaunchError(f"exp.scheduler is slurm, but {command} is not on PATH",
                                  hint="run dlbs on a SLURM login node, or install the SLURM "
                                       "client commands")
        ping = _run(["scontrol", "ping"], timeout=30)
        if ping.returncode != 0 or " is UP" not in ping.stdout:
            answer = _one_line(ping.stdout + ping.stderr) or f"exit status {ping.returncode}"
            raise LaunchError(f"the SLURM controller does not answer: {answer}",
                              hint="start slurmctld (for the tests: .ci/services/slurm.sh), "
                                   "or check SLURM_CONF")
        partitions: dict[str, Invocation] = {}
        for invocation in invocations:
            batch = self._batch(invocation)
            if batch.partition:
                partitions.setdefault(batch.partition, invocation)
        for partition, invocation in partitions.items():
            shown = _run(["scontrol", "show", "partition", partition], timeout=30)
            if shown.returncode != 0:
                raise LaunchError(
                    f"slurm.partition: no partition {partition!r} on this cluster "
                    f"(experiment {invocation.label})", hint="sinfo lists the partitions")

    # -- submitting and tracking -------------------------------------------------------

    def submit(self, invocation: Invocation, log_path: str, name: str | None = None) -> str:
        """Write `<log_path>.sbatch`, submit it, return the job id.

        `name` is the job's name (unique, to find the job by it).
        Raises `SubmitLimit` when sbatch refuses for a submit limit, else `LaunchError`.
        """
        script_path = os.path.abspath(log_path) + ".sbatch"
        self._write_node_monitor(script_path)
        text = self.script(invocation, log_path, script_path, name)
        atomic_write(script_path, text, permissions=0o755)
        return self._sbatch([*self._batch(invocation).extra_args, script_path],
                            f"the job of experiment {invocation.label}", script_path)

    def submit_array(self, entries: Sequence[tuple[Invocation, str]],
                     script_path: str, name: str | None = None) -> list[str]:
        """Submit experiments that share one sbatch request as one job array.

        `entries` are (invocation, log path); the script goes to `script_path`.
        Returns one job id per entry (`<array id>_<index>`), each of which `wait`, `poll`
        and `cancel` accept like any other job id. Refuses entries whose requests differ,
        and more than MAX_ARRAY of them.
        """
        if len(entries) > MAX_ARRAY:
            raise LaunchError(f"a job array takes at most {MAX_ARRAY} experiments, not "
                              f"{len(entries)}", hint="submit it in parts")
        self._write_node_monitor(script_path)
        text = self.array_script(entries, script_path, name)
        atomic_write(script_path, text, permissions=0o755)
        array_id = self._sbatch([*self._batch(entries[0][0]).extra_args, script_path],
                                f"the job array of {len(entries)} experiments", script_path)
        return [f"{array_id}_{index}" for index in range(len(entries))]

    def groups(self, invocations: Sequence[Invocation]) -> list[list[int]]:
        """Invocations with equal requests, at most MAX_ARRAY a group: one job array each."""
        by_shape: dict[tuple[Any, ...], list[int]] = {}
        for index, invocation in enumerate(invocations):  # no request: `submit` says why
            shape = invocation.batch.shape() if invocation.batch is not None else ()
            by_shape.setdefault(shape, []).append(index)
        return [group[start:start + MAX_ARRAY] for group in by_shape.values()
                for start in range(0, len(group), MAX_ARRAY)]

    def submit_many(self, entries: Sequence[tuple[Invocation, str]], name: str) -> list[str]:
        """One job, or a job array whose script is `<name>.sbatch` beside the first log."""
        if len(entries) == 1:
            invocation, log_path = entries[0]
            return [self.submit(invocation, log_path, name)]
        script = os.path.join(os.path.dirname(entries[0][1]), f"{name}.sbatch")
        return self.submit_array(entries, script, name)

    def _write_node_monitor(self, script_path: str) -> None:
        folder = os.path.dirname(os.path.abspath(script_path))
        if folder not in self._monitor_written:
            write_node_monitor(folder)
            self._monitor_written.add(folder)

    def _sbatch(self, args: list[str], what: str, script_path: str) -> str:
        result = _run(["sbatch", "--parsable", *args])
        if result.returncode != 0:
            answer = _one_line(result.stderr or result.stdout)
            error = SubmitLimit if SUBMIT_LIMIT.search(answer) else LaunchError
            raise error(f"sbatch refused {what}: {answer}", hint=f"the script is {script_path}")
        job_id = result.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise LaunchError(f"sbatch answered {result.stdout.strip()!r}, not a job id")
        return job_id

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobState]:
        """One look at many jobs (`squeue`): the state of each job the controller knows.

        A job missing from the answer has been forgotten (ended more than MinJobAge ago):
        `final_outcome` asks accounting about it. `LaunchError` when squeue fails.
        """
        found: dict[str, JobState] = {}
        wanted = set(job_ids)
        for start in range(0, len(job_ids), 500):  # keep each command line short
            chunk = list(job_ids[start:start + 500])
            result = _run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(chunk),
                           "-o", "%i|%T|%r|%M"], timeout=30)
            if result.returncode != 0:
                if "Invalid job id" in result.stderr:
                    continue  # none of these is known any more
                raise LaunchError(f"squeue failed: {_one_line(result.stderr or result.stdout)}")
            for line in result.stdout.splitlines():
                fields = line.strip().split("|")
                if len(fields) == 4 and fields[0] in wanted:
                    found[fields[0]] = _job_state(
                        fields[1].split()[0] if fields[1] else "UNKNOWN", fields[2],
                        _seconds(fields[3]))
        return found

    def find_by_name(self, name: str) -> list[str]:
        """Ids of this user's jobs (array tasks: `<id>_<index>`) called `name` SLURM knows."""
        user = str(os.getuid())
        result = _run(["squeue", "-h", "-r", "-t", "all", "-n", name, "-u", user, "-o", "%i"],
                      timeout=30)
        if result.returncode != 0:
            raise LaunchError(f"squeue failed: {_one_line(result.stderr or result.stdout)}")
        ids = [line.strip() for line in result.stdout.splitlines() if line.strip()]
        if not ids and shutil.which("sacct"):
            accounted = _run(["sacct", "-n", "-X", "-P", "--name", name, "-u", user,
                              "-o", "JobID"], timeout=30)
            if accounted.returncode == 0:
                ids = [line.strip() for line in accounted.stdout.splitlines() if line.strip()]
        return ids

    def find_submitted(self, name: str, index: int | None) -> str | None:
        """The job (array task `<id>_<index>`) of the submission `name`, if SLURM took it."""
        found = self.find_by_name(name)
        if index is not None:
            found = [j for j in found if j.endswith(f"_{index}")] or \
                [f"{j}_{index}" for j in found if "_" not in j]
        return found[0] if found else None

    def final_outcome(self, job_id: str, seen: JobState | None = None) -> Outcome:
        """The outcome of a job that has ended (or that the controller forgot).

        `seen` is its last state from `poll`: an array task cancelled before it started has
        no record of its own, only that state.
        """
        record = self.job_record(job_id)
        if record is None and seen is not None and seen.final:
            record = {"JobState": seen.state, "Reason": seen.reason or "None",
                      "ExitCode": "0:0", "NodeList": "(null)"}
        if record is None and "_" in job_id and seen is not None and seen.queued:
            # A pending array task that is cancelled leaves the array's record at once and
            # never gets one of its own: nothing but its absence tells.
            return Outcome(CANCELLED, f"SLURM job {job_id} CANCELLED before it started (an "
                           "array task that left the queue while pending)",
                           details={"job_id": job_id})
        if record is None:
            return self._forgotten(job_id)
        if record.get("JobState", "").split()[0] not in FINAL_STATES:
            self._wait_final(job_id)
            record = self.job_record(job_id) or record
        state = record.get("JobState", "UNKNOWN").split()[0]
        if state not in FINAL_STATES:
            return Outcome(FAILURE, f"SLURM job {job_id} did not end ({state})",
                           details=_details(job_id, record))
        return self._outcome(job_id, record)

    def adoption(self, job_id: str, name: str, exp_id: str) -> str | None:
        """Why job `job_id` is not the attempt's; None when it is (see the interface).

        The controller's record must say the job is this user's (`UserId`) and called
        `name`; the batch script it runs (`Command`, which dlbs wrote) must run experiment
        `exp_id` (an array task: its own entry of the script's table).
        """
        if not _JOB_ID.match(job_id):
            return f"{job_id[:60]!r} is not a SLURM job id"
        record = self.job_record(job_id)
        if record is None:
            return (f"SLURM no longer knows job {job_id} (it ended more than MinJobAge ago, "
                    "or never was), so whose it was cannot be told")
        owner = record.get("UserId", "")
        uid = re.search(r"\((\d+)\)$", owner)
        if uid is None or int(uid.group(1)) != os.getuid():
            return f"job {job_id} is {owner or 'nobody'}'s, not this user's (uid {os.getuid()})"
        if record.get("JobName") != name:
            return (f"job {job_id} is called {record.get('JobName', '')[:120]!r}, not "
                    f"{name!r} as this attempt's submission")
        task = record.get("ArrayTaskId") if "ArrayJobId" in record else None
        runs = _experiment_in_script(record.get("Command", ""), task)
        if isinstance(runs, tuple):
            return f"job {job_id}'s batch script {runs[0]}"
        if runs != _one_line(exp_id):
            return f"job {job_id} runs experiment {runs[:120]}, not {exp_id}"
        return None

    def job_record(self, job_id: str) -> dict[str, str] | None:
        """The controller's record of a job, or None when it does not know the job."""
        result = _run(["scontrol", "show", "job", "-o", job_id], timeout=30)
        if result.returncode != 0:
            answer = result.stderr + result.stdout  # "Job 7_3 not found" comes on stdout
            if "Invalid job id" in answer or "not found" in answer:
                return None
            raise LaunchError(f"scontrol show job {job_id} failed: "
                              f"{_one_line(result.stderr or result.stdout)}")
        return parse_job_record(result.stdout.splitlines()[0]) if result.stdout.strip() else None

    def wait(self, job_id: str, timeout: float | None) -> Outcome:
        """Follow the job until it ends; see `SchedulerTarget.wait`."""
        return follow(self, job_id, timeout)

    def _wait_final(self, job_id: str, limit: float = 60.0) -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            record = self.job_record(job_id)
            if record is None or record.get("JobState", "").split()[0] in FINAL_STATES:
                return
            time.sleep(self.poll_min)

    def cancel(self, job_id: str) -> None:
        """`scancel` the job; a job that already ended is not an error."""
        _run(["scancel", job_id], timeout=30)

    def _outcome(self, job_id: str, record: dict[str, str]) -> Outcome:
        state = record["JobState"].split()[0]
        status = FINAL_STATES[state]
        details = _details(job_id, record)
        code, _, sig = record.get("ExitCode", "0:0").partition(":")
        returncode = int(code) if code.isdigit() else None
        if status == OK:
            return Outcome(OK, returncode=returncode, details=details)
        facts = [f"reason {record.get('Reason', 'None')}"]
        if state == "CANCELLED" and record.get("NodeList", "(null)") in ("", "(null)"):
            facts.append("before it started")
        if returncode and returncode > 128:  # srun's status for a task killed by a signal
            facts.append(f"exit status {returncode}: killed by {signal_name(returncode - 128)}")
        elif returncode:
            facts.append(f"exit status {returncode}")
        if sig.isdigit() and int(sig):
            facts.append(f"signal {signal_name(int(sig))}")
        if state == "TIMEOUT":
            facts.append(f"time limit {record.get('TimeLimit', '?')}")
        return Outcome(status, f"SLURM job {job_id} {state} ({', '.join(facts)})", returncode,
                       details)

    def _forgotten(self, job_id: str) -> Outcome:
        """A job the controller no longer knows: ask accounting, where there is any."""
        if shutil.which("sacct"):
            result = _run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State,ExitCode,Reason"],
                          timeout=30)
            line = result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""
            if result.returncode == 0 and line:
                state, exit_code, reason = (line.split("|") + ["", ""])[:3]
                record = {"JobState": state.split()[0], "ExitCode": exit_code,
                          "Reason": reason or "None"}
                if record["JobState"] in FINAL_STATES:
                    return self._outcome(job_id, record)
        return Outcome(FAILURE, f"SLURM job {job_id} is unknown to the controller (ended more "
                       "than MinJobAge ago, with no accounting storage to ask)",
                       details={"job_id": job_id})


def _experiment_in_script(path: str, task: str | None) -> str | tuple[str]:
    """The experiment a job script dlbs wrote runs (`task`: an array's entry); else (why,).

    The script is read only when it is a regular file of this user's, at most
    SCRIPT_LIMIT bytes: the path is the controller's, the file dlbs's own.
    """
    if not path or path == "(null)":
        return ("is unknown to SLURM (not a batch script dlbs wrote)",)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        return (f"{path} cannot be read: {error.strerror or error}",)
    with os.fdopen(fd, "rb") as stream:
        status = os.fstat(stream.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_uid != os.getuid():
            return (f"{path} is not a file of this user's",)
        text = stream.read(SCRIPT_LIMIT).decode("utf-8", "replace")
    if task is None:
        found = _SINGLE_HEADER.search(text)
    else:
        found = re.search(rf"^{re.escape(task)}\)  # experiment (.*)$", text, re.MULTILINE)
    if found is None:
        return (f"{path} does not say which experiment it runs" +
                (f" as array task {task}" if task is not None else ""),)
    return found.group(1)


def _details(job_id: str, record: dict[str, str]) -> dict[str, Any]:
    keys = ("JobState", "Reason", "ExitCode", "NodeList", "BatchHost", "RunTime",
            "TimeLimit", "StartTime", "EndTime", "StdOut")
    details: dict[str, Any] = {"job_id": job_id}
    details.update({key.lower(): record[key] for key in keys if key in record})
    return details
