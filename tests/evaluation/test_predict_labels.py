"""Issue 33, item 7: `dlbs predict`'s labels error names exp.num_classes; no weights, a flag.

A labels file that does not fit the model says what to set, as the weights error does; a
model without weights is randomly initialised, and its classes mean nothing: said.
"""

from __future__ import annotations

import json

import pytest
from benchmark_common.accuracy import LabelsError, read_labels
from evaluation_helpers import PALETTE, colour_image


def test_too_few_labels_name_exp_num_classes(tmp_path) -> None:
    (tmp_path / "labels.txt").write_text("red\ngreen\nblue\n\n")
    with pytest.raises(LabelsError) as raised:
        read_labels(str(tmp_path / "labels.txt"), 1000)
    assert str(raised.value) == (
        f"--labels {tmp_path / 'labels.txt'}: 3 class names for a model of 1000 classes; for "
        "a model of 3 classes, set exp.num_classes to 3 (the backend's --num_classes 3)")


@pytest.mark.pytorch
@pytest.mark.slow
def test_a_pytorch_model_without_weights_is_flagged_and_labels_get_the_hint(run_dlbs,
                                                                             tmp_path) -> None:
    import numpy as np

    colour_image(PALETTE[0], np.random.default_rng(0)).save(tmp_path / "red.png")
    (tmp_path / "labels.txt").write_text("red\ngreen\nblue\nyellow\n")
    common = ("predict", "--model", "resnet18", "--top", "2", "-P", "exp.num_classes=4")
    result = run_dlbs(*common, "red.png")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "red.png  (random weights)"
    assert "dlbs predict: warning: no --weights: resnet18 is randomly initialised, its " \
           "classes mean nothing" in result.stderr
    answer, = json.loads(run_dlbs(*common, "--format", "json", "red.png").stdout)
    assert answer["weights"] == "random"
    # Four names for the default 1000 classes: the error says what to set.
    wrong = run_dlbs("predict", "--model", "resnet18", "--labels", "labels.txt", "red.png")
    assert wrong.returncode == 2
    assert "4 class names for a model of 1000 classes; for a model of 4 classes, set " \
           "exp.num_classes to 4" in wrong.stderr
