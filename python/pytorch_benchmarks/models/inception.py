"""Inception v3 (torchvision's, no auxiliary head) and Inception v4 (Szegedy et al. 2016)."""

from __future__ import annotations

import torch
import torch.nn as nn

from .registry import register_model


@register_model("inception3", title="InceptionV3", input_shape=(3, 299, 299), num_classes=1000)
def inception3(num_classes: int) -> nn.Module:
    """Torchvision's Inception v3 without the auxiliary classifier."""
    import torchvision  # when built, as in resnet.py

    return torchvision.models.inception_v3(
        weights=None, aux_logits=False, init_weights=False, num_classes=num_classes
    )


class ConvBN(nn.Sequential):
    """Convolution without bias, batch norm, ReLU: Inception v4's basic unit."""

    def __init__(self, in_ch: int, out_ch: int, kernel, stride: int = 1, padding=0) -> None:
        super().__init__(
            nn.Conv2d(in_ch, out_ch, kernel, stride=stride, padding=padding, bias=False),
            nn.BatchNorm2d(out_ch, eps=1e-3),
            nn.ReLU(inplace=True),
        )


class Branches(nn.Module):
    """Parallel branches over the same input, concatenated along channels."""

    def __init__(self, *branches: nn.Module) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Concatenate every branch's output."""
        return torch.cat([branch(x) for branch in self.branches], 1)


def _seq(*layers: nn.Module) -> nn.Sequential:
    return nn.Sequential(*layers)


def _stem() -> nn.Sequential:
    """299x299x3 -> 35x35x384."""
    return _seq(
        ConvBN(3, 32, 3, stride=2),
        ConvBN(32, 32, 3),
        ConvBN(32, 64, 3, padding=1),
        Branches(nn.MaxPool2d(3, stride=2), ConvBN(64, 96, 3, stride=2)),
        Branches(
            _seq(ConvBN(160, 64, 1), ConvBN(64, 96, 3)),
            _seq(
                ConvBN(160, 64, 1),
                ConvBN(64, 64, (1, 7), padding=(0, 3)),
                ConvBN(64, 64, (7, 1), padding=(3, 0)),
                ConvBN(64, 96, 3),
            ),
        ),
        Branches(ConvBN(192, 192, 3, stride=2), nn.MaxPool2d(3, stride=2)),
    )


def _block_a() -> Branches:
    """35x35x384 -> 35x35x384."""
    return Branches(
        _seq(nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False), ConvBN(384, 96, 1)),
        ConvBN(384, 96, 1),
        _seq(ConvBN(384, 64, 1), ConvBN(64, 96, 3, padding=1)),
        _seq(ConvBN(384, 64, 1), ConvBN(64, 96, 3, padding=1), ConvBN(96, 96, 3, padding=1)),
    )


def _reduction_a() -> Branches:
    """35x35x384 -> 17x17x1024."""
    return Branches(
        nn.MaxPool2d(3, stride=2),
        ConvBN(384, 384, 3, stride=2),
        _seq(ConvBN(384, 192, 1), ConvBN(192, 224, 3, padding=1), ConvBN(224, 256, 3, stride=2)),
    )


def _block_b() -> Branches:
    """17x17x1024 -> 17x17x1024."""
    return Branches(
        _seq(nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False), ConvBN(1024, 128, 1)),
        ConvBN(1024, 384, 1),
        _seq(
            ConvBN(1024, 192, 1),
            ConvBN(192, 224, (1, 7), padding=(0, 3)),
            ConvBN(224, 256, (7, 1), padding=(3, 0)),
        ),
        _seq(
            ConvBN(1024, 192, 1),
            ConvBN(192, 192, (7, 1), padding=(3, 0)),
            ConvBN(192, 224, (1, 7), padding=(0, 3)),
            ConvBN(224, 224, (7, 1), padding=(3, 0)),
            ConvBN(224, 256, (1, 7), padding=(0, 3)),
        ),
    )


def _reduction_b() -> Branches:
    """17x17x1024 -> 8x8x1536."""
    return Branches(
        nn.MaxPool2d(3, stride=2),
        _seq(ConvBN(1024, 192, 1), ConvBN(192, 192, 3, stride=2)),
        _seq(
            ConvBN(1024, 256, 1),
            ConvBN(256, 256, (1, 7), padding=(0, 3)),
            ConvBN(256, 320, (7, 1), padding=(3, 0)),
            ConvBN(320, 320, 3, stride=2),
        ),
    )


class _BlockC(nn.Module):
    """8x8x1536 -> 8x8x1536; two branches split into 1x3 and 3x1 halves."""

    def __init__(self) -> None:
        super().__init__()
        self.pool = _seq(
            nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False), ConvBN(1536, 256, 1)
        )
        self.conv1 = ConvBN(1536, 256, 1)
        self.conv3_in = ConvBN(1536, 384, 1)
        self.conv3_a = ConvBN(384, 256, (1, 3), padding=(0, 1))
        self.conv3_b = ConvBN(384, 256, (3, 1), padding=(1, 0))
        self.conv5_in = _seq(
            ConvBN(1536, 384, 1),
            ConvBN(384, 448, (3, 1), padding=(1, 0)),
            ConvBN(448, 512, (1, 3), padding=(0, 1)),
        )
        self.conv5_a = ConvBN(512, 256, (1, 3), padding=(0, 1))
        self.conv5_b = ConvBN(512, 256, (3, 1), padding=(1, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Six outputs of 256 channels each, concatenated."""
        mid3 = self.conv3_in(x)
        mid5 = self.conv5_in(x)
        outputs = [
            self.pool(x),
            self.conv1(x),
            self.conv3_a(mid3),
            self.conv3_b(mid3),
            self.conv5_a(mid5),
            self.conv5_b(mid5),
        ]
        return torch.cat(outputs, 1)


class InceptionV4(nn.Module):
    """Inception v4 for 299x299 input: stem, 4xA, reduction, 7xB, reduction, 3xC."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = _seq(
            _stem(),
            *[_block_a() for _ in range(4)],
            _reduction_a(),
            *[_block_b() for _ in range(7)],
            _reduction_b(),
            *[_BlockC() for _ in range(3)],
        )
        self.head = _seq(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(1536, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Features, average pool, dropout, classifier."""
        return self.head(self.features(x))


@register_model("inception4", title="InceptionV4", input_shape=(3, 299, 299), num_classes=1000)
def inception4(num_classes: int) -> nn.Module:
    """Inception v4."""
    return InceptionV4(num_classes)
