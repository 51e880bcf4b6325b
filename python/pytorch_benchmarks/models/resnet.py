"""ResNets (He et al. 2015): torchvision's 18-152, and 200/269 built from its Bottleneck."""

from __future__ import annotations

import torch.nn as nn

from .registry import register_model

# Depths torchvision lacks, with the stage sizes of the ResNet-200 (He et al. 2016) and
# ResNet-269 (as in MXNet's and DLBS's symbol files) papers.
_DEEP_LAYERS = {"resnet200": [3, 24, 36, 3], "resnet269": [3, 30, 48, 8]}


def _register(model_id: str, depth: int) -> None:
    """One registration per depth."""

    @register_model(model_id, title=f"ResNet{depth}", input_shape=(3, 224, 224), num_classes=1000)
    def build(num_classes: int) -> nn.Module:
        # torchvision is imported when a model is built: its import pulls in torch._dynamo
        # (torchvision.ops), seconds that a backend running another model need not spend.
        import torchvision
        from torchvision.models.resnet import Bottleneck, ResNet

        if model_id in _DEEP_LAYERS:
            return ResNet(Bottleneck, _DEEP_LAYERS[model_id], num_classes=num_classes)
        return getattr(torchvision.models, model_id)(weights=None, num_classes=num_classes)


for _depth in (18, 34, 50, 101, 152, 200, 269):
    _register(f"resnet{_depth}", _depth)
