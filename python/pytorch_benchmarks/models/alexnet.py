"""AlexNet: the original (Krizhevsky et al. 2012, with LRN) and torchvision's 'one weird trick'."""

from __future__ import annotations

import torch
import torch.nn as nn

from .registry import register_model


class AlexNet(nn.Module):
    """The original single-tower AlexNet for 227x227 input, with local response normalisation."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 96, kernel_size=11, stride=4),
            nn.ReLU(inplace=True),
            nn.LocalResponseNorm(size=5, alpha=1e-4, beta=0.75, k=2.0),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(96, 256, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.LocalResponseNorm(size=5, alpha=1e-4, beta=0.75, k=2.0),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(256, 384, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 384, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(256 * 6 * 6, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Features, flatten, classifier."""
        return self.classifier(torch.flatten(self.features(x), 1))


@register_model("alexnet", title="AlexNet", input_shape=(3, 227, 227), num_classes=1000)
def alexnet(num_classes: int) -> nn.Module:
    """The original AlexNet (LRN, 96-256-384-384-256 filters)."""
    return AlexNet(num_classes)


@register_model("alexnet_owt", title="AlexNetOWT", input_shape=(3, 227, 227), num_classes=1000)
def alexnet_owt(num_classes: int) -> nn.Module:
    """Torchvision's AlexNet ('one weird trick' variant: 64-192-384-256-256, no LRN)."""
    import torchvision  # when built, as in resnet.py

    return torchvision.models.alexnet(weights=None, num_classes=num_classes)
