"""The slurm target: script rendering (unit) and real jobs on the two-node test cluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from dlbs.errors import LaunchError
from dlbs.recipes import Invocation
from dlbs.run.targets import get_target
from dlbs.run.targets.slurm import HOPELESS_REASONS, SlurmTarget, _seconds, parse_job_record
from tests.targets.conftest import make_invocation

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def target() -> SlurmTarget:
    target = get_target("slurm")
    assert isinstance(target, SlurmTarget)
    return target


def _job(experiment: dict, argv: list[str], *, env: dict[str, str] | None = None,
         workdir: str | None = None) -> Invocation:
    """The invocation of `argv` for a SLURM experiment, as a recipe would complete it."""
    return make_invocation({"exp.scheduler": "slurm", **experiment}, argv, env=env,
                           workdir=workdir)


def _script(target: SlurmTarget, invocation: Invocation, log: str = "/logs/exp.log") -> str:
    return target.script(invocation, log, log + ".sbatch")


def _output(log: Path) -> str:
    """The log without the node monitor's lines (`__job.*`), which every job appends."""
    return "".join(line for line in log.read_text().splitlines(keepends=True)
                   if not line.startswith("__job."))


# -- unit: the job script and scontrol's answers ------------------------------------------


def test_job_record_values_may_hold_blanks():
    record = parse_job_record(
        "JobId=7 JobName=dlbs x y UserId=root(0) JobState=FAILED Reason=NonZeroExitCode "
        "ExitCode=3:0 Command=/tmp/a b/job.sbatch WorkDir=/tmp/a b StdOut=/tmp/a b/x.log "
        "AllocNode:Sid=localhost:25 CPUs/Task=1")
    assert record["JobName"] == "dlbs x y"
    assert record["Command"] == "/tmp/a b/job.sbatch"
    assert record["StdOut"] == "/tmp/a b/x.log"
    assert (record["JobState"], record["Reason"], record["ExitCode"]) == (
        "FAILED", "NonZeroExitCode", "3:0")
    assert record["CPUs/Task"] == "1"


@pytest.mark.parametrize(("text", "seconds"), [
    ("00:00:07", 7), ("01:02:03", 3723), ("2-00:00:01", 172801), ("05:00", 300),
    ("UNLIMITED", 0), ("", 0)])
def test_run_times_parse(text, seconds):
    assert _seconds(text) == seconds


def test_script_requests_what_the_experiment_says(target):
    experiment = {"exp.id": "e1", "slurm.partition": "gpu nodes", "slurm.account": "ml",
                  "slurm.time": "00:30:00", "slurm.gpus_per_node": 4, "slurm.nodes": 2,
                  "slurm.ntasks_per_node": 1, "runtime.env.NCCL_DEBUG": "INFO",
                  "runtime.launcher": "numactl --interleave=all"}
    experiment["exp.num_nodes"] = 2
    invocation = _job(experiment, ["torchrun", "--nproc_per_node=4", "bench.py", "--data_dir",
                                   "/my data/it's"], env={"OMP_NUM_THREADS": "1"},
                      workdir="/work dir")
    script = _script(target, invocation, "/logs/100% done.log")
    for line in ["#SBATCH --job-name=dlbs-e1", "#SBATCH --nodes=2",
                 "#SBATCH --ntasks-per-node=1", '#SBATCH --partition="gpu nodes"',
                 "#SBATCH --account=ml", "#SBATCH --time=00:30:00",
                 "#SBATCH --gpus-per-node=4", '#SBATCH --output="/logs/100%% done.log"',
                 "#SBATCH --open-mode=append", '#SBATCH --chdir="/work dir"',
                 "export NCCL_DEBUG=INFO", "export OMP_NUM_THREADS=1",
                 "dlbs_nodes=2 dlbs_tasks_per_node=1", "set -- \\",
                 "    numactl \\", "    --interleave=all \\", "    torchrun \\",
                 """    '/my data/it'"'"'s'"""]:
        assert line in script.splitlines(), line
    assert script.startswith("#!/bin/bash\n")


def test_script_requests_the_cluster_workflow(target):
    experiment = {"exp.id": "wf", "slurm.cpus_per_task": 8, "slurm.mem": "32G",
                  "slurm.gres": "gpu:a100:2", "slurm.gpus_per_node": 0, "slurm.qos": "short",
                  "slurm.exclusive": True, "monitor.frequency": 0.5, "exp.gpus": "0,1",
                  "slurm.prologue": ["module load python/3.11",
                                     "virtualenv --no-download ${SLURM_TMPDIR:-$TMPDIR}/env"]}
    lines = _script(target, _job(experiment, ["b"])).splitlines()
    for line in ["#SBATCH --cpus-per-task=8", "#SBATCH --mem=32G", "#SBATCH --gres=gpu:a100:2",
                 "#SBATCH --qos=short", "#SBATCH --exclusive", "module load python/3.11",
                 "virtualenv --no-download ${SLURM_TMPDIR:-$TMPDIR}/env", "set -e"]:
        assert line in lines, line
    assert not any(line.startswith("#SBATCH --gpus-per-node") for line in lines)
    # The prologue runs as written, before the benchmark and before `set -u`.
    assert lines.index("module load python/3.11") < lines.index("set -u") < \
        next(i for i, line in enumerate(lines) if line.startswith("srun "))
    assert "dlbs_frequency=0.5 dlbs_energy=1 dlbs_gpus=0,1" in "\n".join(lines)


def test_gres_with_gpus_per_node_is_refused(target):
    with pytest.raises(LaunchError, match="slurm.gres .* and slurm.gpus_per_node .* both"):
        _script(target, _job({"slurm.gres": "gpu:2", "slurm.gpus_per_node": 1}, ["b"]))


def test_an_array_refuses_experiments_whose_prologues_differ(target):
    entries = [(_job({"exp.id": "a", "slurm.prologue": ["module load a"]}, ["b"]), "/l/a.log"),
               (_job({"exp.id": "b", "slurm.prologue": ["module load b"]}, ["b"]), "/l/b.log")]
    with pytest.raises(LaunchError, match="differ in prologue"):
        target.array_script(entries, "/l/array.sbatch")


def test_time_limit_follows_exp_timeout_when_slurm_time_is_unset(target):
    script = _script(target, _job({"exp.timeout": 90}, ["b"]))
    assert "#SBATCH --time=3" in script.splitlines()  # 2 minutes, plus one as a margin
    assert "--time" not in _script(target, _job({"exp.timeout": 0}, ["b"]))


def test_extra_args_go_on_the_sbatch_command_line(target):
    experiment = {"exp.log_file": "/logs/e.log",
                  "slurm.extra_args": ["--exclusive", "--mem 4G"]}
    described = target.describe(_job(experiment, ["b"]))
    assert described["sbatch"] == ["sbatch", "--parsable", "--exclusive", "--mem", "4G",
                                   "/logs/e.log.sbatch"]
    assert "sbatch --exclusive --mem 4G /logs/e.log.sbatch" in described["script"]


@pytest.mark.parametrize(("experiment", "message"), [
    ({"runtime.env.BAD-NAME": "1"}, "'BAD-NAME' is not a valid"),
    ({"slurm.nodes": 1, "exp.num_nodes": 2}, "needs 2 node(s)"),
    ({"slurm.nodes": "two"}, "slurm.nodes: expected a positive integer"),
    ({"slurm.partition": 'a"b'}, "cannot put"),
])
def test_script_refuses_what_it_cannot_express(target, experiment, message):
    with pytest.raises(LaunchError) as caught:
        _script(target, _job(experiment, ["b"]))
    assert message in caught.value.message


# -- real jobs on the test cluster ------------------------------------------------------


def _submit(target: SlurmTarget, invocation: Invocation, log: Path) -> str:
    log.write_text("header\n")
    return target.submit(invocation, str(log))


def _wait_for_state(job_id: str, wanted: str, limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True,
                             text=True).stdout
        if f"JobState={wanted}" in out:
            return
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} never reached {wanted}")


@pytest.mark.slurm
def test_a_single_node_job_writes_into_the_log(target, slurm_cluster, tmp_path):
    log = tmp_path / "my logs" / "exp 1.log"
    log.parent.mkdir()
    invocation = _job(
        {"exp.id": "single", "runtime.env.DLBS_V": "a b"},
        ["sh", "-c", 'echo "node=$SLURMD_NODENAME rank=$RANK/$WORLD_SIZE v=$DLBS_V cwd=$(pwd)"'],
        workdir=str(tmp_path))
    target.preflight([invocation])
    job_id = _submit(target, invocation, log)
    outcome = target.wait(job_id, 60)
    assert outcome.status == "ok", (outcome, log.read_text())
    assert outcome.details["job_id"] == job_id
    assert _output(log) == f"header\nnode=node1 rank=0/1 v=a b cwd={tmp_path}\n"
    assert Path(str(log) + ".sbatch").read_text().startswith("#!/bin/bash\n")


@pytest.mark.slurm
def test_a_two_node_job_runs_one_task_per_node_with_a_rendezvous(target, slurm_cluster,
                                                                 tmp_path):
    log = tmp_path / "exp.log"
    invocation = _job(
        {"exp.id": "two", "exp.num_nodes": 2},
        ["sh", "-c", 'echo "task $RANK/$WORLD_SIZE node=$SLURMD_NODENAME '
                     'node_rank=$NODE_RANK master=$MASTER_ADDR:$MASTER_PORT"'])
    outcome = target.wait(_submit(target, invocation, log), 60)
    assert outcome.status == "ok", (outcome, log.read_text())
    lines = sorted(line.split(" master=") for line in _output(log).splitlines()[1:])
    assert [line[0] for line in lines] == ["task 0/2 node=node1 node_rank=0",
                                          "task 1/2 node=node2 node_rank=1"]
    assert lines[0][1] == lines[1][1]
    assert lines[0][1].startswith("127.0.0.1:")  # node1's NodeAddr, not its SLURM name


@pytest.mark.slurm
@pytest.mark.pytorch
def test_a_two_node_pytorch_job_meets_at_the_rendezvous(target, slurm_cluster, tmp_path):
    program = textwrap.dedent("""
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")  # MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
        value = torch.tensor([dist.get_rank() + 1.0])
        dist.all_reduce(value)
        print(f"rank {dist.get_rank()} of {dist.get_world_size()} sum {value.item():g}")
        dist.destroy_process_group()
    """)
    log = tmp_path / "exp.log"
    invocation = _job({"exp.id": "torch2", "exp.num_nodes": 2}, [sys.executable, "-c", program],
                      env={"OMP_NUM_THREADS": "1"})
    outcome = target.wait(_submit(target, invocation, log), 120)
    assert outcome.status == "ok", (outcome, log.read_text())
    assert sorted(line for line in log.read_text().splitlines() if line.startswith("rank")) == [
        "rank 0 of 2 sum 3", "rank 1 of 2 sum 3"]


@pytest.mark.slurm
def test_a_cancelled_job_is_recorded_with_its_reason(target, slurm_cluster, tmp_path):
    job_id = _submit(target, _job({"exp.id": "cancel"}, ["sleep", "300"]),
                     tmp_path / "exp.log")
    _wait_for_state(job_id, "RUNNING")
    subprocess.run(["scancel", job_id], check=True)
    outcome = target.wait(job_id, 60)
    assert outcome.status == "cancelled"
    assert outcome.message.startswith(f"SLURM job {job_id} CANCELLED (reason ")
    assert outcome.details["jobstate"] == "CANCELLED"


@pytest.mark.slurm
def test_a_failing_job_is_recorded_with_slurms_reason(target, slurm_cluster, tmp_path):
    log = tmp_path / "exp.log"
    job_id = _submit(target, _job({"exp.id": "fail"}, ["sh", "-c", "echo bad; exit 5"]), log)
    outcome = target.wait(job_id, 60)
    assert (outcome.status, outcome.returncode) == ("failure", 5)
    assert outcome.message == f"SLURM job {job_id} FAILED (reason NonZeroExitCode, exit status 5)"
    assert "bad" in log.read_text()
    killed = target.wait(_submit(target, _job({"exp.id": "killed"}, ["sh", "-c", "kill -9 $$"]),
                                 log), 60)
    assert killed.status == "failure" and "SIGKILL" in killed.message


@pytest.mark.slurm
def test_a_job_is_reattached_by_its_id_after_dlbs_died(slurm_cluster, tmp_path):
    # A dlbs that submits and dies at once (os._exit: no cleanup of any kind).
    log = tmp_path / "exp.log"
    log.write_text("header\n")
    submitter = textwrap.dedent(f"""
        import os, sys
        from dlbs.recipes import assemble
        from dlbs.run.targets import get_target
        job = get_target("slurm").submit(
            assemble({{"exp.id": "orphan", "exp.scheduler": "slurm"}},
                     ["sh", "-c", "sleep 4; echo finished"]), {str(log)!r})
        print(job, flush=True)
        os._exit(9)
    """)
    died = subprocess.run([sys.executable, "-c", submitter], capture_output=True, text=True,
                          cwd=REPO, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert died.returncode == 9, died.stderr
    job_id = died.stdout.strip()
    # The next dlbs finds the job still queued or running and waits for it, by id.
    state = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True,
                           text=True).stdout
    assert any(f"JobState={s} " in state for s in ("PENDING", "CONFIGURING", "RUNNING"))
    outcome = SlurmTarget().wait(job_id, 60)
    assert outcome.status == "ok"
    assert _output(log) == "header\nfinished\n"
    assert SlurmTarget().wait(job_id, 60).status == "ok"  # and again, once it has ended


@pytest.mark.slurm
def test_a_job_the_cluster_can_never_run_is_cancelled_with_the_reason(target, slurm_cluster,
                                                                     tmp_path):
    target.hopeless_after = 1.0
    job_id = _submit(target, _job({"exp.id": "huge", "slurm.nodes": 3}, ["true"]),
                     tmp_path / "exp.log")
    outcome = target.wait(job_id, 60)
    assert outcome.status == "failure"
    assert outcome.message.startswith(f"SLURM job {job_id} cannot start: pending with reason ")
    assert outcome.details["reason"] in HOPELESS_REASONS  # PartitionNodeLimit or -Config
    assert outcome.message.endswith("; cancelled")


@pytest.mark.slurm
def test_an_unknown_job_is_a_failure_saying_so(target, slurm_cluster):
    outcome = target.wait("99999999", 10)
    assert outcome.status == "failure"
    assert "unknown to the controller" in outcome.message


@pytest.mark.slurm
def test_ctrl_c_while_waiting_cancels_the_job(target, slurm_cluster, tmp_path):
    job_id = _submit(target, _job({"exp.id": "ctrl-c"}, ["sleep", "300"]),
                     tmp_path / "exp.log")
    _wait_for_state(job_id, "RUNNING")
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    outcome = target.wait(job_id, None)
    assert outcome.status == "interrupted"
    _wait_for_state(job_id, "CANCELLED")


@pytest.mark.slurm
def test_preflight_accepts_the_cluster_and_refuses_an_unknown_partition(target, slurm_cluster):
    target.preflight([_job({"exp.id": "a", "slurm.partition": "debug"}, ["true"])])
    with pytest.raises(LaunchError, match="no partition 'nope'"):
        target.preflight([_job({"exp.id": "a", "slurm.partition": "nope"}, ["true"])])


@pytest.mark.slurm
def test_preflight_reports_an_unreachable_controller(target, slurm_cluster, tmp_path,
                                                     monkeypatch):
    conf = Path("/etc/slurm/slurm.conf").read_text()
    wrong = tmp_path / "slurm.conf"
    wrong.write_text(conf.replace("SlurmctldPort=6817", "SlurmctldPort=6899"))
    monkeypatch.setenv("SLURM_CONF", str(wrong))
    with pytest.raises(LaunchError) as caught:
        target.preflight([_job({"exp.id": "a"}, ["true"])])
    assert caught.value.message.startswith("the SLURM controller does not answer: ")
    assert "DOWN" in caught.value.message
    assert "slurmctld" in caught.value.hint


@pytest.mark.slurm
def test_preflight_reports_missing_slurm_commands(target, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LaunchError, match="sbatch is not on PATH"):
        target.preflight([_job({"exp.id": "a"}, ["true"])])


@pytest.mark.slurm
def test_sbatch_refusing_a_job_is_a_launch_error(target, slurm_cluster, tmp_path):
    with pytest.raises(LaunchError, match="sbatch refused the job of experiment bad"):
        _submit(target, _job({"exp.id": "bad", "slurm.extra_args": "--no-such-option"},
                             ["true"]), tmp_path / "exp.log")


@pytest.mark.slurm
@pytest.mark.docker
def test_a_container_job_runs_the_image_on_the_nodes(target, slurm_cluster, test_image,
                                                     tmp_path):
    experiment = {"exp.id": "in-docker", "exp.docker": True,
                  "exp.docker_image": test_image["name"], "exp.docker_args": ["--ipc=host"]}
    log = tmp_path / "exp.log"
    invocation = _job(experiment, ["sh", "-c", 'echo "in container rank=$RANK v=$V"'],
                      env={"V": "1"})
    target.preflight([invocation])
    described = target.describe(invocation)
    assert "docker run" in described["script"].replace(" \\\n    ", " ")
    outcome = target.wait(_submit(target, invocation, log), 60)
    assert outcome.status == "ok", (outcome, log.read_text())
    assert "in container rank=0 v=1" in log.read_text()


def test_described_request_is_json(target):
    described = target.describe(_job({"exp.log_file": "x.log"}, ["b"]))
    assert json.loads(json.dumps(described)) == described


# -- job arrays -------------------------------------------------------------------------


def test_an_array_refuses_experiments_whose_requests_differ(target):
    entries = [(_job({"exp.id": "a", "slurm.time": "10"}, ["b"]), "/l/a.log"),
               (_job({"exp.id": "b", "slurm.time": "20"}, ["b"]), "/l/b.log")]
    with pytest.raises(LaunchError, match="cannot share a job array: their requests differ "
                                          "in time"):
        target.array_script(entries, "/l/array.sbatch")


def test_the_queue_timeout_is_dlbs_own_not_part_of_the_request(target):
    short, long = (_job({"exp.id": name, "slurm.queue_timeout": seconds}, ["b"])
                   for name, seconds in (("a", 30), ("b", 600.5)))
    assert (short.batch.queue_timeout, long.batch.queue_timeout) == (30.0, 600.5)
    assert short.batch.shape() == long.batch.shape()   # one array may hold both
    assert target.groups([short, long]) == [[0, 1]]
    assert "600" not in _script(target, long)           # nothing SLURM is asked for
    assert _job({"exp.id": "c"}, ["b"]).batch.queue_timeout == 0.0


@pytest.mark.parametrize("seconds", [-1, "soon", float("nan")])
def test_a_queue_timeout_that_is_not_seconds_is_refused(seconds):
    with pytest.raises(LaunchError, match="slurm.queue_timeout: expected seconds"):
        _job({"exp.id": "a", "slurm.queue_timeout": seconds}, ["b"])


@pytest.mark.slurm
def test_a_job_array_runs_each_experiment_into_its_own_log(target, slurm_cluster, tmp_path):
    program = 'import sys\nprint("multi-line", sys.argv[1])\n'  # a token that spans lines
    entries = [
        (_job({"exp.id": "arr-ok", "runtime.env.V": "one"},
              ["sh", "-c", 'echo "first $V $(pwd)"'], workdir=str(tmp_path)),
         tmp_path / "first log.log"),
        (_job({"exp.id": "arr-py"}, [sys.executable, "-c", program, "a b"]),
         tmp_path / "second.log"),
        (_job({"exp.id": "arr-fail"}, ["sh", "-c", "echo third; exit 4"]),
         tmp_path / "third.log"),
    ]
    for _, log in entries:
        log.write_text("header\n")
    job_ids = target.submit_array([(i, str(log)) for i, log in entries],
                                  str(tmp_path / "array.sbatch"))
    assert len(job_ids) == 3 and all(j.endswith(f"_{n}") for n, j in enumerate(job_ids))
    outcomes = [target.wait(job_id, 60) for job_id in job_ids]
    assert [o.status for o in outcomes] == ["ok", "ok", "failure"], outcomes
    assert outcomes[2].returncode == 4
    assert _output(entries[0][1]) == f"header\nfirst one {tmp_path}\n"
    assert _output(entries[1][1]) == "header\nmulti-line a b\n"
    third = entries[2][1].read_text()  # srun's own messages may come first
    assert third.startswith("header\n") and "third\n" in third
