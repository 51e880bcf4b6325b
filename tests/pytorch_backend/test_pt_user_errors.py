"""Bad input is refused plainly: the failure keys, one stderr line, exit 2, no traceback."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.pytorch

FAST = ["--batch_size", "2", "--num_batches", "1", "--num_warmup_batches", "0"]


def assert_refused(run, *fragments: str) -> None:
    assert run.returncode == 2, run.stderr[-3000:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchmarks.py: error: "), run.stderr
    assert run.values["results.status"] == "failure"
    for fragment in fragments:
        assert fragment in run.values["results.status_msg"]
        assert fragment in lines[0]
    assert "results.throughput" not in run.values and "results.time" not in run.values
    assert run.counts["results.status"] == 1


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["--model", "resnet51"], ["unknown model 'resnet51'", "known models: ", "resnet50"]),
        (["--model", "resnet18", "--dtype", "int8"], ["bad flag: ", "unsupported dtype 'int8'"]),
        (["--model", "resnet18", "--batch_size", "two"], ["--batch_size", "'two'"]),
        (["--model", "resnet18", "--forward_only", "maybe"], ["boolean", "'maybe'"]),
        (["--model", "resnet18", "--data_backend", "hdf5"], ["--data_backend", "'hdf5'"]),
        (["--model", "resnet18", "--data_dir", "/nonexistent/imagenet",
          "--data_backend", "image_folder"], ["--data_dir /nonexistent/imagenet: no such"]),
        (["--model", "tiny", "--extra_models", "/nonexistent/models.py"],
         ["--extra_models: no such file: /nonexistent/models.py"]),
        (["--model", "sensor_net", "--device", "gpu"], ["torch sees no CUDA device"]),
        (["--batch_size", "2"], ["--model"]),
    ],
)
def test_user_errors_are_refused_without_a_traceback(backend, flags, fragments):
    device = [] if "--device" in flags else ["--device", "cpu"]
    assert_refused(backend(*device, *FAST, *flags), *fragments)


def test_a_real_dataset_that_does_not_fit_is_a_user_error(backend, tmp_path):
    (tmp_path / "empty").mkdir()
    assert_refused(backend("--model", "resnet18", "--device", "cpu", *FAST,
                           "--data_dir", str(tmp_path / "empty"), "--data_backend", "image_folder"),
                   "the directory is empty")


def test_a_crash_keeps_its_traceback_and_exit_status(backend, extra_models):
    # Not the user's fault: the model runs out of memory inside torch. The traceback stays,
    # and out of memory has its own exit status.
    run = backend("--model", "oom_model", "--extra_models", str(extra_models), "--device", "cpu",
                  *FAST)
    assert run.returncode == 3
    assert "Traceback" in run.stderr
    assert run.values["results.status_msg"].startswith("out of memory: ")
