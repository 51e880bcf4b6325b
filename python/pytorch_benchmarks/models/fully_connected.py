"""Fully connected networks from DLBS: deep_mnist, sensor_net and acoustic_model."""

from __future__ import annotations

import torch.nn as nn

from .registry import register_model


def _mlp(input_size: int, hidden: list[int], num_classes: int) -> nn.Sequential:
    """Linear + ReLU for each hidden width, then a linear classifier."""
    layers: list[nn.Module] = []
    width = input_size
    for size in hidden:
        layers += [nn.Linear(width, size), nn.ReLU(inplace=True)]
        width = size
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


@register_model("deep_mnist", title="DeepMNIST", input_shape=(784,), num_classes=10)
def deep_mnist(num_classes: int) -> nn.Module:
    """Five hidden layers of decreasing width (2500 ... 500)."""
    return _mlp(784, [2500, 2000, 1500, 1000, 500], num_classes)


@register_model("sensor_net", title="SensorNet", input_shape=(784,), num_classes=16)
def sensor_net(num_classes: int) -> nn.Module:
    """Three hidden layers of 1024."""
    return _mlp(784, [1024, 1024, 1024], num_classes)


@register_model("acoustic_model", title="AcousticModel", input_shape=(540,), num_classes=8192)
def acoustic_model(num_classes: int) -> nn.Module:
    """Five hidden layers of 2048 and 8192 senone outputs (a speech acoustic model)."""
    return _mlp(540, [2048] * 5, num_classes)
