"""The harness's own parts: buckets, a run's own LoadGen folder, and the host-bound warning.

The harness runs in this process with small systems of its interface (system.py) whose
batches take known times.
"""

from __future__ import annotations

import time

import pytest
from benchmark_common import harness
from benchmark_common.options import EvaluationOptions
from benchmark_common.system import InferenceSystem
from hypothesis import given
from hypothesis import strategies as st


@given(st.integers(1, 4096), st.data())
def test_every_batch_a_server_forms_pads_to_a_prepared_size(batch, data):
    sizes = harness.bucket_sizes(batch)
    assert sizes == sorted(set(sizes)) and sizes[0] == 1 and sizes[-1] == batch
    count = data.draw(st.integers(1, batch))
    padded = harness.padded_size(sizes, count)
    assert padded in sizes and count <= padded
    assert padded < 2 * count or padded == 1  # never more padding than samples


def test_a_taken_folder_is_passed_over_never_reused(tmp_path):
    first = harness.claim_folder(str(tmp_path / "run.loadgen"))
    (tmp_path / "run.attempt2.loadgen").symlink_to(tmp_path / "elsewhere")
    second = harness.claim_folder(str(tmp_path / "run.loadgen"))
    assert (first, second) == (str(tmp_path / "run.loadgen"),
                               str(tmp_path / "run.attempt3.loadgen"))
    assert not (tmp_path / "elsewhere").exists()  # the link was not followed


class Timed(InferenceSystem):
    """A device that runs asynchronously: launching takes `launch_s`, the batch `run_s`."""

    total_samples = performance_samples = 64
    asynchronous = True

    def __init__(self, launch_s: float, run_s: float) -> None:
        self.launch_s, self.run_s = launch_s, run_s

    def load(self, indices):
        pass

    def submit(self, indices, top=0, lane=0):
        time.sleep(self.launch_s)
        return lambda: time.sleep(self.run_s)

    def label(self, index):
        return 0


@pytest.mark.parametrize(("launch_s", "run_s", "warned"), [(0.008, 0.001, True),
                                                           (0.0002, 0.008, False)])
def test_a_run_whose_host_launches_set_the_pace_says_so(tmp_path, launch_s, run_s, warned):
    options = EvaluationOptions(scenario="offline", min_duration_s=0.3, min_query_count=10,
                                loadgen_dir=str(tmp_path / "lg"))
    failures: list[BaseException] = []
    results = harness.run_evaluation(Timed(launch_s, run_s), options, batch_size=4, warmup=1,
                                     say=lambda line: None, abort=failures.append)
    assert not failures
    fraction = launch_s / (launch_s + run_s)
    assert results["results.launch_fraction"] == pytest.approx(fraction, abs=0.25)
    warnings = results.get("results.stats_warnings", [])
    assert any(w.startswith("results.launch_fraction: ") for w in warnings) == warned
    assert results["results.recompiles"] == 0


@pytest.mark.parametrize(("classes", "top5"), [(None, 0.5), (1000, 0.5), (6, 0.5), (5, None),
                                               (2, None)])
def test_top5_of_a_model_of_five_classes_or_fewer_is_not_reported(classes, top5):
    from benchmark_common.accuracy import AccuracyCounter

    counter = AccuracyCounter(2, keep_predictions=False, num_classes=classes)
    counter.add(0, 1, [1, 0], [0.6, 0.4])
    counter.add(1, 9, [0, 1, 2, 3, 4, 5], [0.2] * 6)
    results = counter.results()
    assert results["results.top1"] == 0.5 and results.get("results.top5") == top5
    assert ("results.top5_unavailable" in results) == (top5 is None)
