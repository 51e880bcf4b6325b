"""Issue 23 item 8 as a user met it: evaluating a 10-class resnet18 with `dlbs run`.

Without exp.num_classes the run fails, and its reason names the parameter to set; with it,
the accuracy run completes over a 10-class dataset.
"""

from __future__ import annotations

import pytest
from evaluation_helpers import logs_by_scenario, make_image_folder

pytestmark = [pytest.mark.pytorch, pytest.mark.slow]


def test_a_ten_class_resnet18_evaluates_with_exp_num_classes(run_dlbs, tmp_path):
    import torch
    import torchvision

    weights = tmp_path / "resnet18_10.pt"
    torch.manual_seed(0)
    torch.save(torchvision.models.resnet18(weights=None, num_classes=10).state_dict(), weights)
    folder = make_image_folder(tmp_path / "val", 10, per_class=1)
    common = ["-P", "exp.model=resnet18", "-P", f"exp.weights={weights}",
              "-P", f"exp.data_dir={folder}", "-P", "pytorch.data_backend=image_folder",
              "-P", "exp.scenario=accuracy", "-P", "exp.replica_batch=5",
              "-P", "exp.num_warmup_batches=0"]
    failed = run_dlbs("run", *common, "-P", "exp.log_dir=logs/without")
    assert failed.returncode != 0
    (without,) = logs_by_scenario(tmp_path / "logs" / "without").values()
    assert without["results.status"] == "failure"
    assert "set exp.num_classes to 10" in without["results.status_msg"]
    done = run_dlbs("run", *common, "-P", "exp.num_classes=10", "-P", "exp.log_dir=logs/with")
    assert done.returncode == 0, done.stderr
    (with_classes,) = logs_by_scenario(tmp_path / "logs" / "with").values()
    assert with_classes["results.status"] == "ok"
    assert 0 <= with_classes["results.top1"] <= with_classes["results.top5"] <= 1
