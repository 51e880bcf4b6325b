"""VGG 11/13/16/19 (Simonyan and Zisserman 2014): torchvision's, without batch norm."""

from __future__ import annotations

import torch.nn as nn

from .registry import register_model


def _register(model_id: str, title: str) -> None:
    """One registration per depth; the builder looks the torchvision function up by id."""

    @register_model(model_id, title=title, input_shape=(3, 224, 224), num_classes=1000)
    def build(num_classes: int) -> nn.Module:
        import torchvision  # when built, as in resnet.py

        return getattr(torchvision.models, model_id)(weights=None, num_classes=num_classes)


for _id, _title in [("vgg11", "VGG11"), ("vgg13", "VGG13"), ("vgg16", "VGG16"), ("vgg19", "VGG19")]:
    _register(_id, _title)
