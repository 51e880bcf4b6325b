"""--num_classes: the exported model's class count, in the cache's file name and metadata."""

from __future__ import annotations

import pytest
from onnxruntime_benchmarks.export import cache_path, expected_metadata
from onnxruntime_benchmarks.options import FlagError, parse_options
from ort_helpers import CPU, run_backend

pytestmark = pytest.mark.onnxruntime


def test_the_class_count_names_its_own_cache_file():
    plain = parse_options(["--model", "sensor_net", *CPU, "--batch_size", "2"])
    five = parse_options(["--model", "sensor_net", *CPU, "--batch_size", "2",
                          "--num_classes", "5"])
    # Without the flag, the name (and so every cache made before) is as it was.
    assert cache_path(plain).name == "sensor_net-float32-b2-seed0.onnx"
    assert cache_path(five).name == "sensor_net-c5-float32-b2-seed0.onnx"
    assert "dlbs.num_classes" not in expected_metadata(plain)
    assert expected_metadata(five)["dlbs.num_classes"] == "5"


def test_a_model_file_is_run_as_it_is():
    with pytest.raises(FlagError, match="a --model_file runs as it is"):
        parse_options(["--model", "m", *CPU, "--model_file", "m.onnx", "--num_classes", "5"])


@pytest.mark.pytorch
@pytest.mark.slow
def test_the_exported_model_has_the_class_count(tmp_path):
    import onnx

    run = run_backend("--model", "sensor_net", *CPU, "--batch_size", "2",
                      "--cache_dir", str(tmp_path), "--num_classes", "5")
    assert run.returncode == 0, run.stderr
    (exported,) = tmp_path.iterdir()
    assert exported.name == "sensor_net-c5-float32-b2-seed0.onnx"
    (output,) = onnx.load(str(exported)).graph.output
    assert [d.dim_value for d in output.type.tensor_type.shape.dim] == [2, 5]
