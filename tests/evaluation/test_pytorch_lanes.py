"""The PyTorch system's lanes on the CPU: every batch size prepared before LoadGen starts.

docs/evaluation.md, "Getting the GPU's real numbers": padded buckets give exactly the outputs
of unpadded batches; a compiled model serves batches of every size up to its batch without
compiling again; a shape nobody prepared is counted in `results.recompiles` and warned
about; several devices (the CPU standing in for GPUs, a replica and the resident samples on
each) are served by one process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from evaluation_helpers import PYTHON_DIR, TORCH_MODELS, backend_env, run_backend

pytestmark = [pytest.mark.pytorch]

BATCH = 8


@pytest.fixture(scope="module")
def models_file(tmp_path_factory) -> Path:
    """The test models' file, registered in this process too."""
    from pytorch_benchmarks.models import get_model_spec, load_model_file

    path = tmp_path_factory.mktemp("lanes") / "models.py"
    path.write_text(TORCH_MODELS)
    try:
        get_model_spec("tiny_ten")
    except ValueError:  # not registered in this process yet
        load_model_file(str(path))
    return path


def options(models_file: Path, *flags: str):
    from pytorch_benchmarks.cli import parse_options

    return parse_options(["--model", "tiny_ten", "--extra_models", str(models_file),
                          "--forward_only", "true", "--device", "cpu", "--batch_size",
                          str(BATCH), "--num_threads", "1", *flags])


def test_padded_buckets_give_exactly_the_unpadded_outputs(models_file):
    import torch
    from benchmark_common.harness import bucket_sizes
    from pytorch_benchmarks.evaluation import build_system

    opts = options(models_file, "--scenario", "server", "--target_qps", "10",
                   "--inference_streams", "2")
    cpu = torch.device("cpu")
    system = build_system(opts, [cpu, cpu])  # two devices, two streams each: four lanes
    assert system.lanes == 4 and len(system.pool) == 2
    assert system.lane[0].forward.model is not system.lane[1].forward.model  # a replica each
    resident = list(range(BATCH))
    system.prepare(bucket_sizes(BATCH), 1, resident)
    assert [lane.forward.sizes for lane in system.lane] == [[1, 2, 4, 8]] * 4
    model = system.lane[0].forward.model
    for lane in system.lane:
        for count in range(1, BATCH + 1):
            batch = system.batch(resident[:count], lane.index)
            with torch.inference_mode():
                unpadded = model(batch)
            assert torch.equal(lane.forward(batch), unpadded), (lane.index, count)
            assert system.infer(resident[:count], top=3, lane=lane.index)[0].shape == (count, 3)
    assert system.compilations() == 0


@pytest.mark.slow
def test_a_compiled_model_serves_every_batch_size_without_compiling(models_file):
    import torch
    from benchmark_common.harness import bucket_sizes
    from pytorch_benchmarks.evaluation import build_system

    opts = options(models_file, "--scenario", "server", "--target_qps", "10",
                   "--compile", "true", "--inference_streams", "2")
    system = build_system(opts, [torch.device("cpu")])
    resident = list(range(BATCH))
    system.prepare(bucket_sizes(BATCH), 1, resident)
    before = system.compilations()
    assert before == 2  # size 1, and one graph whose batch is dynamic
    for lane in range(system.lanes):
        for count in range(1, BATCH + 1):
            system.infer(resident[:count], lane=lane)
    assert system.compilations() == before
    # One larger than every prepared size is run as it comes, and counted.
    system.infer(list(range(BATCH + 1)))
    assert system.compilations() > before


def backend(tmp_path: Path, models_file: Path, *flags: str, patch: str = ""):
    """The backend as `dlbs run` starts it; `patch` runs first (the test's own change)."""
    args = ["--model", "tiny_ten", "--extra_models", str(models_file), "--forward_only", "true",
            "--device", "cpu", "--num_threads", "1", "--batch_size", str(BATCH),
            "--num_warmup_batches", "1", "--min_duration_s", "1", "--min_query_count", "20",
            "--loadgen_dir", str(tmp_path / "lg"), *flags]
    if not patch:
        return run_backend("pytorch", *args)
    code = (f"import sys; sys.path.insert(0, {str(PYTHON_DIR)!r}); {patch}; "
            "from pytorch_benchmarks.benchmarks import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=600, env=backend_env())
    from dlbs.results.protocol import parse_lines

    return done, parse_lines(done.stdout.splitlines()).values


@pytest.mark.slow
def test_a_compiled_server_records_no_recompiles(tmp_path, models_file):
    # Held 20 ms at 200 queries/s, the server forms batches of many sizes up to 8.
    run = backend(tmp_path, models_file, "--compile", "true", "--scenario", "server",
                  "--target_qps", "200", "--max_queue_delay_ms", "20",
                  "--latency_bound_ms", "1000")
    assert run.returncode == 0, run.stderr + run.stdout
    assert run.values["results.recompiles"] == 0
    assert "results.stats_warnings" not in run.values
    assert "prepare: batch sizes [1, 2, 4, 8]" in run.stdout


@pytest.mark.slow
def test_an_unprepared_shape_is_detected_and_reported(tmp_path, models_file):
    # Forced: the harness prepares batches of 1, 2 and 4 only, while offline serves 8.
    done, values = backend(
        tmp_path, models_file, "--compile", "true", "--scenario", "offline",
        patch="import benchmark_common.harness as h; "
              "h._Harness._batch_sizes = lambda self: [1, 2, 4]")
    assert done.returncode == 0, done.stderr + done.stdout
    assert values["results.recompiles"] >= 1
    (warning,) = values["results.stats_warnings"]
    assert warning.startswith(f"results.recompiles: {values['results.recompiles']} ")
    assert "warning: results.recompiles" in done.stdout


def test_offline_over_two_devices_uses_both(tmp_path, models_file):
    import torch
    from benchmark_common.harness import run_evaluation
    from pytorch_benchmarks.evaluation import build_system

    opts = options(models_file, "--scenario", "offline", "--min_duration_s", "0.5",
                   "--min_query_count", "10", "--loadgen_dir", str(tmp_path / "lg"))
    cpu = torch.device("cpu")
    system = build_system(opts, [cpu, cpu])
    used = []
    submit = system.submit

    def recorded(indices, top=0, lane=0):
        used.append(lane)
        return submit(indices, top, lane)

    system.submit = recorded
    failures = []
    results = run_evaluation(system, opts.evaluation, batch_size=BATCH, warmup=1,
                             say=lambda line: None, abort=failures.append)
    assert not failures
    assert results["results.qps"] > 0 and results["results.recompiles"] == 0
    assert set(used) == {0, 1}
