"""GoogLeNet as BVLC trained it in Caffe (Szegedy et al. 2014): LRN, no batch norm, no aux heads."""

from __future__ import annotations

import torch
import torch.nn as nn

from .registry import register_model


def _conv_relu(
    in_ch: int, out_ch: int, kernel: int, stride: int = 1, pad: int = 0
) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(in_ch, out_ch, kernel, stride, pad), nn.ReLU(inplace=True))


class Inception(nn.Module):
    """Four branches: 1x1; 1x1 -> 3x3; 1x1 -> 5x5; 3x3 max pool -> 1x1; concatenated."""

    def __init__(
        self, in_ch: int, ch1: int, ch3_red: int, ch3: int, ch5_red: int, ch5: int, pool_proj: int
    ) -> None:
        super().__init__()
        self.branch1 = _conv_relu(in_ch, ch1, 1)
        self.branch3 = nn.Sequential(
            _conv_relu(in_ch, ch3_red, 1), _conv_relu(ch3_red, ch3, 3, pad=1)
        )
        self.branch5 = nn.Sequential(
            _conv_relu(in_ch, ch5_red, 1), _conv_relu(ch5_red, ch5, 5, pad=2)
        )
        self.branch_pool = nn.Sequential(
            nn.MaxPool2d(3, stride=1, padding=1), _conv_relu(in_ch, pool_proj, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run the branches on the same input and concatenate along channels."""
        branches = (self.branch1, self.branch3, self.branch5, self.branch_pool)
        return torch.cat([branch(x) for branch in branches], 1)


class GoogLeNet(nn.Module):
    """BVLC GoogLeNet for 224x224 input (6,998,552 parameters with 1000 classes)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            _conv_relu(3, 64, 7, stride=2, pad=3),
            nn.MaxPool2d(3, stride=2, ceil_mode=True),
            nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75),
            _conv_relu(64, 64, 1),
            _conv_relu(64, 192, 3, pad=1),
            nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75),
            nn.MaxPool2d(3, stride=2, ceil_mode=True),
        )
        self.inception3 = nn.Sequential(
            Inception(192, 64, 96, 128, 16, 32, 32),
            Inception(256, 128, 128, 192, 32, 96, 64),
            nn.MaxPool2d(3, stride=2, ceil_mode=True),
        )
        self.inception4 = nn.Sequential(
            Inception(480, 192, 96, 208, 16, 48, 64),
            Inception(512, 160, 112, 224, 24, 64, 64),
            Inception(512, 128, 128, 256, 24, 64, 64),
            Inception(512, 112, 144, 288, 32, 64, 64),
            Inception(528, 256, 160, 320, 32, 128, 128),
            nn.MaxPool2d(3, stride=2, ceil_mode=True),
        )
        self.inception5 = nn.Sequential(
            Inception(832, 256, 160, 320, 32, 128, 128),
            Inception(832, 384, 192, 384, 48, 128, 128),
        )
        self.head = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.4), nn.Linear(1024, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Stem, three inception stages, average pool and classifier."""
        return self.head(self.inception5(self.inception4(self.inception3(self.stem(x)))))


@register_model("googlenet", title="GoogleNet", input_shape=(3, 224, 224), num_classes=1000)
def googlenet(num_classes: int) -> nn.Module:
    """The BVLC GoogLeNet."""
    return GoogLeNet(num_classes)
