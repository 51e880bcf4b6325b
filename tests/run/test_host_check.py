"""Inputs and GPUs an experiment needs from the host it runs on (issue 23, item 11).

`dlbs validate` reports a missing exp.weights, exp.data_dir or GPU as a problem naming the
parameter; `dlbs run` fails such an experiment before it starts, and the sweep goes on. What
runs elsewhere (SLURM, a remote engine) is said to be unchecked. The host's GPUs come from
nvidia-smi: a canned one (tests/monitor/data/nvidia-smi) stands for a machine with GPUs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlbs.monitor.gpu import list_gpus
from dlbs.recipes.resources import HostGpus, elsewhere, missing_resources
from dlbs.run.host_check import HostCheck, host_gpus
from tests.run.conftest import attempts

FAKE_SMI = Path(__file__).resolve().parents[1] / "monitor" / "data"
TWO_GPUS = HostGpus.listed(["0", "1"])
DUMMY = ["-P", "exp.framework=dummy", "-P", "exp.num_batches=2", "-P", "exp.num_warmup_batches=0"]


def experiment(**values) -> dict:
    return {"exp.framework": "pytorch", "exp.scheduler": "none", "exp.docker": False,
            **{name.replace("__", "."): value for name, value in values.items()}}


def messages(found) -> list[str]:
    return [str(item) for item in found]


@pytest.fixture
def smi_path(monkeypatch, tmp_path):
    """PATH with the canned nvidia-smi first; FAKE_NVIDIA_SMI_OUTPUT picks its answer."""
    for name in ("FAKE_NVIDIA_SMI_OUTPUT", "FAKE_NVIDIA_SMI_EXIT", "FAKE_NVIDIA_SMI_SLEEP",
                 "FAKE_NVIDIA_SMI_CALLS"):
        monkeypatch.delenv(name, raising=False)
    path = f"{FAKE_SMI}{os.pathsep}{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    return path


@pytest.fixture
def no_smi_path(tmp_path):
    """PATH of this interpreter's folder and the system's, without any nvidia-smi."""
    folders = [str(Path(os.sys.executable).parent), "/usr/bin", "/bin"]
    assert not any((Path(folder) / "nvidia-smi").exists() for folder in folders)
    return os.pathsep.join(folders)


# -- the comparison -----------------------------------------------------------------------------

def test_missing_inputs_are_named_by_their_parameter(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "w.pt").write_bytes(b"x")
    present = experiment(exp__data_dir="data", exp__weights="w.pt")
    assert missing_resources(present, TWO_GPUS) == []
    absent = experiment(exp__data_dir="/no/data", exp__weights="gone.pt", exp__labels="data",
                        pytorch__extra_models="models.py")
    found = missing_resources(absent, TWO_GPUS)
    assert [m.parameter for m in found] == ["exp.data_dir", "exp.weights", "exp.labels",
                                            "pytorch.extra_models"]
    assert messages(found) == [
        "exp.data_dir '/no/data' does not exist on this host (set exp.data_dir to the dataset, "
        "or empty for synthetic data)",
        f"exp.weights 'gone.pt' ({tmp_path}/gone.pt) does not exist on this host (set "
        f"exp.weights to the weights file, or empty for random weights)",
        f"exp.labels 'data' ({tmp_path}/data) is not a file on this host (set exp.labels to "
        f"the class-name file, or empty)",
        f"pytorch.extra_models 'models.py' ({tmp_path}/models.py) does not exist on this host "
        f"(set pytorch.extra_models to an existing file, or empty)"]
    model = experiment(exp__framework="onnxruntime", onnxruntime__model_file="m.onnx")
    assert messages(missing_resources(model, TWO_GPUS))[0].startswith(
        "onnxruntime.model_file 'm.onnx'")


def test_a_dataset_in_the_other_format_than_the_pytorch_data_backend_reads(tmp_path):
    """The backend would stop at its start ("no data.mdb in it") after validate said ok."""
    images, lmdb = tmp_path / "images", tmp_path / "lmdb"
    (images / "cats").mkdir(parents=True)
    (images / "cats" / "1.jpg").write_bytes(b"jpeg")
    lmdb.mkdir()
    (lmdb / "data.mdb").write_bytes(b"")
    for folder, backend in ((images, "image_folder"), (lmdb, "caffe_lmdb")):
        assert missing_resources(experiment(exp__data_dir=str(folder),
                                            pytorch__data_backend=backend), TWO_GPUS) == []
    [found] = missing_resources(experiment(exp__data_dir=str(images),
                                           pytorch__data_backend="caffe_lmdb"), TWO_GPUS)
    assert found.parameter == "pytorch.data_backend" and str(found) == (
        f"exp.data_dir '{images}' holds no data.mdb, but pytorch.data_backend caffe_lmdb "
        "reads a Caffe LMDB (set pytorch.data_backend image_folder: it reads class folders "
        "of images, ImageNet's layout)")
    [found] = missing_resources(experiment(exp__data_dir=str(lmdb),
                                           pytorch__data_backend="image_folder"), TWO_GPUS)
    assert str(found).endswith("(set pytorch.data_backend caffe_lmdb)")
    # Other backends find the format themselves.
    assert missing_resources(experiment(exp__framework="mxnet", exp__data_dir=str(images)),
                             TWO_GPUS) == []


def test_a_container_gets_its_inputs_from_this_host():
    found = missing_resources(experiment(exp__docker=True, exp__weights="/no/w.pt"), TWO_GPUS)
    assert messages(found) == [
        "exp.weights '/no/w.pt' does not exist on this host, which mounts it into the "
        "container (set exp.weights to the weights file, or empty for random weights)"]


def test_gpus_the_host_does_not_have():
    assert missing_resources(experiment(exp__gpus="0,1"), TWO_GPUS) == []
    assert messages(missing_resources(experiment(exp__gpus="0:1,2:3"), TWO_GPUS)) == [
        "exp.gpus '0:1,2:3' asks for GPU 2, 3, but this host has 2 GPUs (nvidia-smi lists "
        "0, 1) (set exp.gpus to GPUs this host has, or to \"\" to run on the CPU)"]
    none = HostGpus.listed(None)
    (found,) = missing_resources(experiment(exp__gpus="0"), none)
    assert found.parameter == "exp.gpus" and found.message == (
        "exp.gpus '0' asks for GPU 0, but this host has no NVIDIA GPU (nvidia-smi is not "
        "installed)")
    assert missing_resources(experiment(exp__gpus=""), none) == []
    unknown = HostGpus.unknown("nvidia-smi gives no answer: it hung")
    assert missing_resources(experiment(exp__gpus="7"), unknown) == []  # cannot say: run


def test_the_dummy_backend_needs_gpus_only_in_a_container():
    none = HostGpus.listed(None)
    assert missing_resources(experiment(exp__framework="dummy", exp__gpus="0,1"), none) == []
    (found,) = missing_resources(experiment(exp__framework="dummy", exp__gpus="0",
                                            exp__docker=True), none)
    assert found.parameter == "exp.gpus"  # the Engine's device request needs a real GPU


def test_what_runs_elsewhere_is_not_checked(monkeypatch):
    slurm = experiment(exp__scheduler="slurm", exp__gpus="9", exp__weights="/no/w.pt")
    assert elsewhere(slurm) == "under SLURM, on a compute node"
    assert missing_resources(slurm, HostGpus.listed(None)) == []
    docker = experiment(exp__docker=True, exp__weights="/no/w.pt")
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")
    assert elsewhere(docker) is None
    monkeypatch.setenv("DOCKER_HOST", "tcp://builder:2376")
    assert elsewhere(docker) == "in a container of the engine at tcp://builder:2376"
    assert missing_resources(docker, TWO_GPUS) == []
    podman = {**docker, "exp.container_engine": "podman",
              "runtime.podman_socket": "ssh://me@box/run/podman/podman.sock"}
    assert elsewhere(podman) == "in a container of the engine at ssh://me@box/run/podman/podman.sock"
    for local in ("", "/run/podman/podman.sock", "unix:///run/user/0/podman/podman.sock"):
        monkeypatch.setenv("CONTAINER_HOST", "")
        assert elsewhere({**podman, "runtime.podman_socket": local}) is None, local
    assert elsewhere(experiment(exp__scheduler="flux")) == "under the scheduler flux"


def test_the_host_gpus_come_from_nvidia_smi(smi_path, monkeypatch, tmp_path):
    assert list_gpus() == ["0", "1"]
    assert host_gpus() == HostGpus(("0", "1"), "nvidia-smi lists 0, 1")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_EXIT", "9")
    gpus = host_gpus()
    assert gpus.ids is None and gpus.source.startswith("nvidia-smi gives no answer: ")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert list_gpus() is None and host_gpus() == HostGpus((), "nvidia-smi is not installed")


def test_nvidia_smi_runs_once_and_only_for_gpu_experiments(smi_path, monkeypatch, tmp_path):
    calls = tmp_path / "calls"
    monkeypatch.setenv("FAKE_NVIDIA_SMI_CALLS", str(calls))
    check = HostCheck()
    list(check.watch([experiment(), experiment(exp__scheduler="slurm", exp__gpus="0")]))
    assert not calls.exists()
    list(check.watch([experiment(exp__gpus="0"), experiment(exp__gpus="1,2")]))
    assert len(calls.read_text().splitlines()) == 1
    assert check.problems == ["experiment #2: exp.gpus '1,2' asks for GPU 2, but this host "
                              "has 2 GPUs (nvidia-smi lists 0, 1) (set exp.gpus to GPUs this "
                              "host has, or to \"\" to run on the CPU)"]
    assert check.notes() == ["1 experiment runs under SLURM, on a compute node: not checked "
                             "here (paths and GPUs)"]


# -- dlbs validate ------------------------------------------------------------------------------

def test_validate_reports_missing_inputs_and_gpus(dlbs_cli, tmp_path, no_smi_path):
    result = dlbs_cli("validate", "-P", "exp.weights=gone.pt", "-P", "exp.data_dir=/no/data",
                      "-P", "exp.gpus=0", cwd=tmp_path, env={"PATH": no_smi_path})
    assert result.returncode == 2
    problems = [line for line in result.stdout.splitlines() if line.startswith("problem:")]
    assert [p.split(": ", 2)[2].split(" ")[0] for p in problems] == [
        "exp.data_dir", "exp.weights", "exp.gpus"]
    assert "this host has no NVIDIA GPU (nvidia-smi is not installed)" in problems[2]
    assert result.stderr.startswith("dlbs: error: the plan is not valid: experiment #1: "
                                    "exp.data_dir '/no/data' does not exist on this host")
    assert "(and 2 more problems above)" in result.stderr
    # The plan alone is valid.
    plan_only = dlbs_cli("validate", "--plan-only", "-P", "exp.weights=gone.pt", "-P",
                         "exp.gpus=0", cwd=tmp_path, env={"PATH": no_smi_path})
    assert plan_only.returncode == 0, plan_only.stderr
    assert plan_only.stdout == "plan: 1 experiments\nok\n"


def test_validate_and_run_name_the_data_backend_an_image_folder_needs(dlbs_cli, run_dlbs,
                                                                     tmp_path):
    """An accuracy run on an image folder without pytorch.data_backend image_folder."""
    (tmp_path / "val" / "cats").mkdir(parents=True)
    (tmp_path / "val" / "cats" / "1.jpg").write_bytes(b"jpeg")
    spec = ["-P", "exp.scenario=accuracy", "-P", "exp.data_dir=val"]
    said = ("exp.data_dir 'val' holds no data.mdb, but pytorch.data_backend caffe_lmdb reads a "
            "Caffe LMDB (set pytorch.data_backend image_folder")
    result = dlbs_cli("validate", *spec, cwd=tmp_path)
    assert result.returncode == 2 and f"problem: experiment #1: {said}" in result.stdout
    assert result.stderr.startswith(f"dlbs: error: the plan is not valid: experiment #1: {said}")
    ran = run_dlbs("run", *spec)
    assert ran.returncode == 1 and f"(not started: {said}" in ran.stderr, ran.stderr
    assert not list((tmp_path / "logs").glob("*.log"))  # the backend never started


def test_validate_checks_gpus_against_nvidia_smi(dlbs_cli, tmp_path, smi_path):
    ok = dlbs_cli("validate", "-P", "exp.gpus=0, 1", cwd=tmp_path, env={"PATH": smi_path})
    assert ok.returncode == 0 and ok.stdout == "plan: 1 experiments\nok\n", ok.stderr
    missing = dlbs_cli("validate", "-V", 'exp.gpus=["0", "0,1,2,3"]', cwd=tmp_path,
                       env={"PATH": smi_path})
    assert missing.returncode == 2
    assert "problem: experiment #2: exp.gpus '0,1,2,3' asks for GPU 2, 3, but this host has " \
           "2 GPUs (nvidia-smi lists 0, 1)" in missing.stdout


def test_validate_says_what_it_did_not_check(dlbs_cli, tmp_path, no_smi_path):
    result = dlbs_cli("validate", *DUMMY, "-P", "exp.scheduler=slurm", "-P", "exp.gpus=0",
                      "-P", "exp.weights=/no/w.pt", cwd=tmp_path, env={"PATH": no_smi_path})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ("plan: 1 experiments\nnote: 1 experiment runs under SLURM, on a "
                             "compute node: not checked here (paths and GPUs)\nok\n")


# -- dlbs run -------------------------------------------------------------------------------

def test_run_fails_an_experiment_without_its_inputs_before_it_starts(run_dlbs, tmp_path):
    (tmp_path / "w.pt").write_bytes(b"weights")
    result = run_dlbs("run", *DUMMY, "-V", 'exp.weights=["gone.pt", "w.pt"]')
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("[1/2] failure ")
    assert lines[0].endswith(f"(not started: exp.weights 'gone.pt' ({tmp_path}/gone.pt) does "
                             f"not exist on this host (set exp.weights to the weights file, "
                             f"or empty for random weights))")
    assert lines[1].startswith("[2/2] ok ")  # the sweep goes on
    rows = attempts(tmp_path / "logs" / "results.db")
    assert sorted((status, (message or "")[:12]) for _, _, status, message in rows) == [
        ("failure", "not started:"), ("ok", "")]
    assert len(list((tmp_path / "logs").glob("*.log"))) == 1  # nothing started, no log
    assert "(log: None)" not in result.stderr


def test_run_fails_a_gpu_experiment_on_a_host_without_that_gpu(run_dlbs, tmp_path, smi_path):
    # PyTorch would fail inside the backend, naming its own flag (--device); dlbs names
    # exp.gpus before the backend starts.
    result = run_dlbs("run", "-P", "exp.gpus=3", "-P", "exp.num_batches=1",
                      env={"PATH": smi_path})
    assert result.returncode == 1
    assert "not started: exp.gpus '3' asks for GPU 3, but this host has 2 GPUs (nvidia-smi " \
           "lists 0, 1) (set exp.gpus to GPUs this host has, or to \"\" to run on the CPU)" \
           in result.stderr
    assert "--device" not in result.stderr
    assert not list((tmp_path / "logs").glob("*.log"))
    dry = run_dlbs("run", "-P", "exp.gpus=3", "--dry-run", env={"PATH": smi_path})
    assert dry.returncode == 0
    assert "1 to fail (missing on this host)" in dry.stdout
    assert " fail " in dry.stdout.splitlines()[1]
