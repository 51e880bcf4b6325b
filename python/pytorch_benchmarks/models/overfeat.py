"""OverFeat, fast model (Sermanet et al. 2013), as in the convnet-benchmarks suite."""

from __future__ import annotations

import torch
import torch.nn as nn

from .registry import register_model


class OverFeat(nn.Module):
    """Five convolutions and three fully connected layers for 231x231 input."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 96, kernel_size=11, stride=4),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(96, 256, kernel_size=5),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(256, 512, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(512, 1024, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(1024, 1024, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2, stride=2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(1024 * 6 * 6, 3072),
            nn.ReLU(inplace=True),
            nn.Dropout(),
            nn.Linear(3072, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Features, flatten, classifier."""
        return self.classifier(torch.flatten(self.features(x), 1))


@register_model("overfeat", title="OverFeat", input_shape=(3, 231, 231), num_classes=1000)
def overfeat(num_classes: int) -> nn.Module:
    """OverFeat fast model."""
    return OverFeat(num_classes)
