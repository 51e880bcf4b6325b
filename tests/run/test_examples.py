"""Every spec in examples/ plans cleanly; the ones this machine can run, run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.run.conftest import attempts

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_validates(dlbs_cli, example):
    # The plan alone: most examples are for GPU machines, which this one need not be.
    result = dlbs_cli("validate", "--plan-only", "--config", str(example))
    assert result.returncode == 0, result.stderr
    assert "plan: 0 experiments" not in result.stdout


def test_the_quickstart_validates_on_this_host_too(dlbs_cli):
    example = str(EXAMPLES[[p.stem for p in EXAMPLES].index("quickstart")])
    result = dlbs_cli("validate", "--config", example)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.endswith("ok\n") and "problem:" not in result.stdout


@pytest.mark.pytorch
def test_quickstart_runs_as_the_readme_says(run_dlbs, tmp_path):
    example = str(EXAMPLES[[p.stem for p in EXAMPLES].index("quickstart")])
    result = run_dlbs("run", "--config", example, timeout=900)
    assert result.returncode == 0, result.stderr
    assert "4 ok" in result.stderr
    report = run_dlbs("report", "logs/quickstart", "--type", "regular")
    assert report.returncode == 0, report.stderr
    assert "resnet18" in report.stdout and "alexnet_owt" in report.stdout


@pytest.mark.mxnet
def test_mxnet_example_runs_with_a_parameter_server(run_dlbs, tmp_path):
    example = str(EXAMPLES[[p.stem for p in EXAMPLES].index("mxnet")])
    result = run_dlbs("run", "--config", example, "-P", "exp.model=deep_mnist", timeout=600)
    assert result.returncode == 0, result.stderr
    assert [r[2] for r in attempts(tmp_path / "logs" / "mxnet" / "results.db")] == ["ok"] * 4


@pytest.mark.slurm
@pytest.mark.mxnet
def test_mxnet_cpu_threads_example_runs_under_slurm_with_its_report(run_dlbs, tmp_path,
                                                                     slurm_cluster):
    example = str(EXAMPLES[[p.stem for p in EXAMPLES].index("mxnet_cpu_threads")])
    result = run_dlbs("run", "--config", example, "-P", "exp.num_batches=3",
                      "-P", "exp.num_warmup_batches=1", "-P", "slurm.max_in_flight=1",
                      timeout=600)
    assert result.returncode == 0, result.stderr
    folder = tmp_path / "logs" / "mxnet_cpu_threads"
    scripts = {p.read_text() for p in folder.glob("*.sbatch")}
    for threads in (1, 2):
        assert any(f"#SBATCH --cpus-per-task={threads}\n" in s and
                   f"export OMP_NUM_THREADS={threads}\n" in s for s in scripts), threads
    report = run_dlbs("report", str(folder / "results.db"), "--by", "threads",
                      "--columns", "time_median,throughput,use.cpu_mean", "--format", "json")
    assert report.returncode == 0, report.stderr
    rows = json.loads(report.stdout)["rows"]
    assert sorted(row["threads"] for row in rows) == [1, 2]
    # Measured inside the jobs by the node monitor: the CPU each job used on its node.
    assert all(row["use.cpu_mean"] > 0 for row in rows), rows


def test_docker_example_requests_gpus(run_dlbs):
    example = str(EXAMPLES[[p.stem for p in EXAMPLES].index("docker")])
    result = run_dlbs("run", "--config", example, "--dry-run", "--format", "json")
    assert result.returncode == 0, result.stderr
    requests = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(requests) == 4 and {r["target"] for r in requests} == {"docker"}
    text = json.dumps(requests[1])
    assert "/workspace/pytorch_benchmarks" in text and '"0", "1"' in text


def test_slurm_example_writes_multi_node_jobs(run_dlbs):
    example = str(EXAMPLES[[p.stem for p in EXAMPLES].index("slurm")])
    result = run_dlbs("run", "--config", example, "--dry-run", "--format", "json")
    assert result.returncode == 0, result.stderr
    one, two = [json.loads(line) for line in result.stdout.splitlines()]
    assert "#SBATCH --nodes=2" in two["script"] and "--nnodes=2" in two["script"]
    assert "--nproc_per_node=4" in one["script"] and "--standalone" in one["script"]
