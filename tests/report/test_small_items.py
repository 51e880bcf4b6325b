"""Issue 23, item 7: the small things a user read that were not what was measured."""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from dlbs.report import Options, build_report, render
from dlbs.report.select import Filter
from dlbs.results.stats import WARNINGS_KEY, summarize
from tests.report.conftest import REPO, dummy_run, records
from tests.results.helpers_results import experiment

if str(REPO / "python") not in sys.path:   # the backends' shared package, in-process
    sys.path.insert(0, str(REPO / "python"))


def test_a_regular_report_says_why_an_accuracy_run_is_left_out() -> None:
    # Before: "1 ok experiment(s) without a model, a batch size or a value to show" of an
    # accuracy run that has all three (no batch time or throughput is the reason).
    items = records(experiment("resnet50", 1, 8, 10.0),
                    experiment("resnet50", 1, 8, None, exp_id="acc", phase="inference", **{
                        "exp.scenario": "accuracy", "results.top1": 0.75}))
    notes = build_report(items, "regular").footnotes()
    assert ("Not counted: 1 ok experiment(s) without a value of the columns shown (batch time "
            "(ms), throughput (inst/s)); of them, 1 of exp.scenario accuracy (--type "
            "accuracy).") in notes
    assert not any("a batch size" in note for note in notes)


def test_one_replicas_throughput_is_not_a_contradiction() -> None:
    # The dummy backend runs its replicas in one process and prints one replica's
    # throughput; the engine's is the effective batch's.
    params = {"exp.replica_batch": 16, "exp.num_replicas": 2, "exp.effective_batch": 32}
    times = [2.0, 2.0, 2.0]
    one_replica = summarize(params, {"results.time_data": times,
                                     "results.throughput": 16 * 1000.0 / 2.0})
    assert WARNINGS_KEY not in one_replica and one_replica["results.throughput"] == 16000.0
    wrong = summarize(params, {"results.time_data": times, "results.throughput": 9000.0})
    assert wrong[WARNINGS_KEY] == ["results.throughput: the backend printed 9000.0, its "
                                   "per-batch times give 16000"]


def test_the_throughput_reads_the_planned_effective_batch() -> None:
    # Decided once by the planner (exp.effective_batch), not computed again from the GPUs.
    computed = summarize({"exp.replica_batch": 16, "exp.num_gpus": 4, "exp.effective_batch": 32},
                         {"results.time_data": [4.0]})
    assert computed["results.throughput"] == 8000.0
    assert "results.throughput" not in summarize({"exp.replica_batch": 16},
                                                 {"results.time_data": [4.0]})


@pytest.mark.slow
def test_a_dummy_run_on_two_replicas_has_no_contradiction(tmp_path: Path, dlbs: Any) -> None:
    result = dummy_run(tmp_path, "-P", "exp.gpus=0,1", "-P", "exp.num_batches=3",
                       "-P", "dummy.sleep=0.002")
    assert result.returncode == 0, result.stderr
    report = dlbs("report", str(tmp_path))
    assert report.returncode == 0, report.stderr
    assert "contradict" not in report.stdout and "replicas 2" in report.stdout


def test_a_baseline_report_shows_medians_beside_its_speedup() -> None:
    # Before: the median batch time and the speedup of medians beside the throughput of
    # the mean batch time.
    items = records(*(experiment("resnet50", 1, 32, None, exp_id=name, **{
        "exp.framework": name, "results.time_data": times})
        for name, times in (("pytorch", [10.0, 10.0, 40.0]), ("mxnet", [5.0, 5.0, 40.0]))))
    report = build_report(items, Options(baseline=[Filter.parse("exp.framework=pytorch")]))
    rows = {row["framework"]: row for row in report.records()}
    assert [item.key for item in report.metrics] == [
        "results.time_median", "throughput_median", "speedup"]
    assert (rows["mxnet"]["time_median"], rows["mxnet"]["throughput_median"],
            rows["mxnet"]["speedup"]) == (5.0, 6400.0, 2.0)
    assert "throughput at the median (inst/s)" in render(report, "text")


def test_a_strong_report_over_weak_data_says_why_it_is_empty() -> None:
    weak = records(*(experiment("resnet50", gpus, 32, 100.0 + gpus, exp_id=f"g{gpus}")
                     for gpus in (1, 2, 4)))
    notes = build_report(weak, "strong").footnotes()
    assert any(note.startswith("No row has more than one GPU count") and "--type weak" in note
               for note in notes)
    assert not any(note.startswith("No row") for note in build_report(weak, "weak").footnotes())


def test_trace_files_are_as_readable_as_logs(tmp_path: Path) -> None:
    from benchmark_common.chrome_trace import write_trace

    # Before: 0600 (tempfile.mkstemp's), while logs are created 0644.
    trace = tmp_path / "t.json.gz"
    write_trace(str(trace), {}, [])
    assert stat.S_IMODE(trace.stat().st_mode) == 0o644


def test_an_unreadable_image_names_the_file_not_a_buffer(tmp_path: Path) -> None:
    from benchmark_common.preprocess import ImageError, open_image

    with pytest.raises(ImageError) as refused:
        open_image(b"not an image", "bad.jpg")
    assert str(refused.value) == "bad.jpg: not an image Pillow can read"
    assert "BytesIO" not in str(refused.value)


def test_the_engine_keeps_the_warnings_a_backend_printed() -> None:
    # The LoadGen harness prints results.stats_warnings itself (no per-batch times); with
    # per-batch times the engine's own contradictions used to replace them.
    loadgen = summarize({}, {"results.stats_warnings": ["results.recompiles: 2 ..."]})
    assert loadgen[WARNINGS_KEY] == ["results.recompiles: 2 ..."]
    both = summarize({"exp.effective_batch": 8}, {
        "results.time_data": [4.0], "results.time": 5.0,
        "results.stats_warnings": ["host-bound"], "results.warnings": "slow disk"})
    assert both[WARNINGS_KEY] == ["host-bound", "slow disk", "results.time: the backend "
                                  "printed 5.0, its per-batch times give 4"]
