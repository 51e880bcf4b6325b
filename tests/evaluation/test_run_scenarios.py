"""The scenarios as ordinary experiments: planned, swept, run, stored, or refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from evaluation_helpers import logs_by_scenario, statuses

from dlbs.config.loader import load_spec
from dlbs.errors import LaunchError, PlanError
from dlbs.plan.builder import Planner
from dlbs.recipes import invocation_for
from dlbs.results.protocol import parse_log

DUMMY_QUICK = ["-P", "exp.framework=dummy", "-P", "dummy.sleep=0.01", "-P", "exp.replica_batch=4",
               "-P", "exp.min_duration_s=0.3", "-P", "exp.min_query_count=10"]


def plan(*params: str) -> list[dict]:
    return list(Planner(load_spec(params=list(params))).experiments())


def test_a_sweep_over_scenarios_runs_and_is_stored(run_dlbs, tmp_path):
    result = run_dlbs("run", *DUMMY_QUICK, "-P", "exp.num_samples=40",
                      "-P", "exp.publish_predictions=true", "-V",
                      'exp.scenario=["benchmark", "single_stream", "offline", "server", '
                      '"accuracy"]', "-P", "exp.target_qps=50", "-P", "exp.latency_bound_ms=500")
    assert result.returncode == 0, result.stderr
    assert [status for _, status in statuses(tmp_path / "logs" / "results.db")] == ["ok"] * 5
    logs = logs_by_scenario(tmp_path / "logs")
    assert logs["benchmark"]["exp.phase"] == "training"  # benchmark keeps today's default
    assert "results.latency_p50" not in logs["benchmark"]
    assert logs["benchmark"]["results.time"] > 0
    for name in ("single_stream", "offline", "server", "accuracy"):
        values = logs[name]
        assert values["exp.phase"] == "inference"
        stem = os.path.splitext(str(values["log"]))[0]
        # LoadGen's logs beside the experiment's log, their folder in the results.
        assert values["results.loadgen_log_dir"] == stem + ".loadgen"
        assert Path(stem + ".loadgen", "mlperf_log_detail.txt").is_file()
    assert logs["single_stream"]["results.latency_p50"] >= 10
    assert logs["server"]["results.latency_bound_met"] is True
    assert logs["server"]["results.target_qps"] == 50
    assert logs["offline"]["results.qps"] > 0
    accuracy = logs["accuracy"]
    assert (accuracy["results.top1"], accuracy["results.top5"]) == (0.75, 1.0)
    assert accuracy["results.num_samples"] == 40
    predictions = Path(accuracy["results.predictions_file"])
    assert predictions == Path(os.path.splitext(str(accuracy["log"]))[0] +
                               ".predictions.jsonl")
    assert len(predictions.read_text().splitlines()) == 40
    # Predictions are only written where asked and where they mean something.
    assert not list((tmp_path / "logs").glob("*offline*.predictions.jsonl"))


def test_the_scenario_and_its_bounds_change_the_id_publishing_does_not():
    base = ["exp.framework=dummy", "exp.scenario=server", "exp.target_qps=10"]
    (first,) = plan(*base)
    (published,) = plan(*base, "exp.publish_predictions=true")
    assert published["exp.id"] == first["exp.id"]
    for change in ("exp.target_qps=20", "exp.latency_bound_ms=30", "exp.latency_percentile=90",
                   "exp.min_duration_s=1", "exp.min_query_count=5", "exp.num_samples=10",
                   "exp.weights=w.pt", "exp.scenario=offline", "exp.inference_streams=3",
                   "exp.max_queue_delay_ms=2"):
        (other,) = plan(*base, change)
        assert other["exp.id"] != first["exp.id"], change


def test_a_scenario_over_several_gpus_is_one_process_serving_them_all():
    (experiment,) = plan("exp.framework=pytorch", "exp.scenario=offline", "exp.gpus=0,1,2,3")
    invocation = invocation_for(experiment)
    assert "torch.distributed.run" not in invocation.argv  # one LoadGen, one process
    assert invocation.argv[invocation.argv.index("--num_gpus") + 1] == "4"
    assert list(invocation.gpus) == ["0", "1", "2", "3"]
    (benchmark,) = plan("exp.framework=pytorch", "exp.gpus=0,1,2,3")
    assert "torch.distributed.run" in invocation_for(benchmark).argv


def test_streams_default_to_two_for_offline_and_max_qps_on_a_gpu_and_one_elsewhere():
    def streams(*params: str) -> int:
        (experiment,) = plan("exp.scenario=offline", *params)
        argv = invocation_for(experiment).argv
        assert argv[argv.index("--max_queue_delay_ms") + 1] == "0.0"
        return int(argv[argv.index("--inference_streams") + 1])

    assert streams("exp.framework=pytorch", "exp.gpus=0") == 2
    assert streams("exp.framework=pytorch", "exp.gpus=0", "exp.scenario=max_qps") == 2
    assert streams("exp.framework=pytorch", "exp.gpus=0", "exp.scenario=accuracy",
                   "exp.data_dir=/data/val") == 2
    assert streams("exp.framework=pytorch", "exp.gpus=0", "exp.scenario=server",
                   "exp.target_qps=100") == 1
    assert streams("exp.framework=pytorch", "exp.scenario=max_qps") == 1
    assert streams("exp.framework=pytorch") == 1
    assert streams("exp.framework=mxnet", "exp.gpus=0") == 1
    assert streams("exp.framework=dummy", "exp.gpus=0") == 1


def test_a_rerun_keeps_each_attempts_loadgen_folder(run_dlbs, tmp_path):
    # docs/evaluation.md: each attempt keeps its own LoadGen folder, as it keeps its log.
    for _ in range(2):
        result = run_dlbs("run", *DUMMY_QUICK, "-P", "exp.scenario=single_stream",
                          "-P", "exp.rerun=always")
        assert result.returncode == 0, result.stderr
    logs = sorted((tmp_path / "logs").glob("*.log"), key=lambda log: len(log.name))
    assert len(logs) == 2 and ".attempt2." in logs[1].name
    folders = []
    for log in logs:
        values = parse_log(log).values
        folder = Path(values["results.loadgen_log_dir"])
        assert folder == Path(os.path.splitext(str(log))[0] + ".loadgen")
        assert (folder / "mlperf_log_detail.txt").is_file()
        folders.append(folder)
    first, second = ((folder / "mlperf_log_detail.txt").read_bytes() for folder in folders)
    assert first != second  # the second attempt wrote beside the first, not over it


def test_benchmark_experiments_keep_their_command_line():
    (experiment,) = plan("exp.framework=pytorch")
    assert experiment["exp.phase"] == "training"
    assert not any("--scenario" in item for item in experiment["pytorch.args"])
    assert "--loadgen_dir" not in invocation_for(experiment).argv


@pytest.mark.parametrize(("params", "message"), [
    (["exp.scenario=offline", "exp.phase=training"], "the scenarios measure inference"),
    (["exp.scenario=server"], "needs exp.target_qps"),
    (["exp.scenario=max_qps", "exp.latency_bound_ms=0"], "exp.latency_bound_ms > 0"),
    (["exp.scenario=offline", "exp.framework=onnxruntime"], "pytorch, mxnet and dummy"),
    (["exp.scenario=accuracy", "exp.framework=pytorch"], "set exp.data_dir"),
    (["exp.scenario=offline", "exp.gpus=0,1", "exp.num_nodes=2"], "one process on one node"),
    (["exp.scenario=offline", "exp.framework=mxnet", "exp.gpus=0,1"], "MXNet scenario runs on one"),
    (["exp.scenario=server", "exp.target_qps=5", "exp.framework=mxnet",
      "exp.inference_streams=2"], "set exp.inference_streams 1"),
    (["exp.scenario=fastest"], "not one of the choices"),
])
def test_what_a_scenario_cannot_run_is_refused_when_planned(params, message):
    with pytest.raises(Exception) as caught:
        plan("exp.framework=dummy", *params)
    assert message in str(caught.value)


def test_the_refusal_is_one_line_from_the_cli(run_dlbs):
    result = run_dlbs("plan", "-P", "exp.framework=pytorch", "-P", "exp.scenario=offline",
                      "-P", "exp.phase=training")
    assert result.returncode == 2
    assert result.stderr.startswith("dlbs: error: the scenarios measure inference")
    assert "Traceback" not in result.stderr


def test_every_framework_renders_the_evaluation_flags():
    for framework in ("pytorch", "mxnet", "dummy"):
        (experiment,) = plan(f"exp.framework={framework}", "exp.scenario=server",
                             "exp.target_qps=12.5", "exp.weights=/w/model weights.bin",
                             "exp.labels=/w/labels.txt")
        argv = invocation_for(experiment).argv
        joined = " ".join(argv)
        assert "--scenario server --target_qps 12.5 --latency_bound_ms 15.0" in joined
        assert argv[argv.index("--weights") + 1] == "/w/model weights.bin"  # one argument
        assert argv[argv.index("--labels") + 1] == "/w/labels.txt"
        assert argv[argv.index("--loadgen_dir") + 1].endswith(".loadgen")
        assert "--predictions_file" not in argv


def test_mxnet_gains_extra_models():
    (experiment,) = plan("exp.framework=mxnet", "mxnet.extra_models=/m/models.py")
    argv = invocation_for(experiment).argv
    assert argv[argv.index("--extra_models") + 1] == "/m/models.py"


def test_a_container_sees_inputs_and_the_log_folder_at_their_host_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.pt").write_bytes(b"w")
    (tmp_path / "labels.txt").write_text("a\nb\n")
    (tmp_path / "models.py").write_text("")
    (experiment,) = plan("exp.framework=pytorch", "exp.docker=true", "exp.scenario=accuracy",
                         "exp.data_dir=/data", "exp.weights=w.pt", "exp.labels=labels.txt",
                         "pytorch.extra_models=models.py", "exp.publish_predictions=true")
    invocation = invocation_for(experiment)
    mounts = {mount.container: mount for mount in invocation.mounts}
    common = mounts["/workspace/benchmark_common"]
    assert common.read_only and Path(common.host, "harness.py").is_file()
    for name in ("w.pt", "labels.txt", "models.py"):
        mount = mounts[str(tmp_path / name)]
        assert mount.host == str(tmp_path / name) and mount.read_only
    logs = mounts[str(tmp_path / "logs")]
    assert not logs.read_only
    # Relative paths of the spec resolve in the container as on the host.
    assert invocation.workdir == str(tmp_path)
    argv = invocation.argv
    assert argv[argv.index("--loadgen_dir") + 1].startswith(str(tmp_path / "logs") + "/")
    assert argv[argv.index("--predictions_file") + 1].endswith(".predictions.jsonl")


def test_a_missing_weights_file_is_found_before_a_container_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (experiment,) = plan("exp.framework=pytorch", "exp.docker=true", "exp.weights=gone.pt")
    with pytest.raises(LaunchError, match="exp.weights: no such file: gone.pt"):
        invocation_for(experiment)


def test_every_container_gets_the_shared_package():
    (experiment,) = plan("exp.framework=mxnet", "exp.docker=true")
    invocation = invocation_for(experiment)
    assert [m.container for m in invocation.mounts] == ["/workspace/benchmark_common"]
    assert invocation.workdir is None  # nothing at a host path: the image's own


def test_a_backend_moved_elsewhere_finds_the_package_through_pythonpath(tmp_path):
    (beside,) = plan("exp.framework=dummy")
    assert "PYTHONPATH" not in invocation_for(beside).env
    (moved,) = plan("exp.framework=dummy", f"dummy.bench_path={tmp_path}/dummy_benchmarks",
                    "runtime.env.PYTHONPATH=/opt/lib")
    common = Path(moved["runtime.benchmark_common_path"])
    assert invocation_for(moved).env["PYTHONPATH"] == f"{common.parent}{os.pathsep}/opt/lib"


def test_dry_run_names_the_loadgen_folder_and_makes_nothing(run_dlbs, tmp_path):
    result = run_dlbs("run", *DUMMY_QUICK, "-P", "exp.scenario=offline", "--dry-run",
                      "--format", "json")
    assert result.returncode == 0, result.stderr
    assert ".loadgen" in result.stdout
    assert not (tmp_path / "logs").exists()


def test_plan_error_type_is_the_rules():
    with pytest.raises(PlanError):
        plan("exp.framework=dummy", "exp.scenario=single_stream", "exp.phase=training")


def test_scenario_defaults_are_documented_and_typed():
    spec = load_spec()
    for name in ("exp.scenario", "exp.target_qps", "exp.latency_bound_ms",
                 "exp.latency_percentile", "exp.min_duration_s", "exp.min_query_count",
                 "exp.weights", "exp.num_samples", "exp.labels", "exp.publish_predictions",
                 "exp.inference_streams", "exp.max_queue_delay_ms",
                 "mxnet.extra_models", "pytorch.extra_models"):
        definition = spec.params[name]
        assert definition.type and definition.desc, name
    assert json.loads(json.dumps(spec.params["exp.scenario"].choices)) == [
        "benchmark", "single_stream", "multi_stream", "server", "offline", "max_qps",
        "accuracy"]
