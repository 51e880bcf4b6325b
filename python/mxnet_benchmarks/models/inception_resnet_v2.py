"""Inception-ResNet-v2 (Szegedy et al. 2016) in the TF-slim layout that DLBS also used.

The paper's figures have channel typos (1154, 2048 residual widths); the released TF-slim
network fixes them: a 320-channel Mixed_5b stem, 10 x block35, 20 x block17, 10 x block8
(residual widths 320, 1088, 2080, scaled by 0.17, 0.1, 0.2), then a 1536-channel 1x1 conv.
"""

from __future__ import annotations

from mxnet import gluon

from .layers import Concurrent, avg_pool_same, conv_bn, max_pool, sequential
from .registry import Model, register_model

nn = gluon.nn


def _c(channels: int, kernel, strides=1, padding=0) -> nn.HybridSequential:
    return conv_bn(channels, kernel, strides, padding)


class _ScaledResidual(gluon.HybridBlock):
    """`relu(x + scale * up(concat(branches(x))))`; the last block8 has no ReLU."""

    def __init__(self, branches: Concurrent, width: int, scale: float, relu: bool = True,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.branches = branches
        self.up = nn.Conv2D(width, 1)
        self.scale = scale
        self.relu = relu

    def hybrid_forward(self, F, x):  # noqa: D102
        out = x + self.scale * self.up(self.branches(x))
        return F.relu(out) if self.relu else out


def _block35() -> _ScaledResidual:
    return _ScaledResidual(Concurrent(
        _c(32, 1),
        sequential(_c(32, 1), _c(32, 3, padding=1)),
        sequential(_c(32, 1), _c(48, 3, padding=1), _c(64, 3, padding=1)),
    ), 320, 0.17)


def _block17() -> _ScaledResidual:
    return _ScaledResidual(Concurrent(
        _c(192, 1),
        sequential(_c(128, 1), _c(160, (1, 7), padding=(0, 3)), _c(192, (7, 1), padding=(3, 0))),
    ), 1088, 0.1)


def _block8(relu: bool = True) -> _ScaledResidual:
    return _ScaledResidual(Concurrent(
        _c(192, 1),
        sequential(_c(192, 1), _c(224, (1, 3), padding=(0, 1)), _c(256, (3, 1), padding=(1, 0))),
    ), 2080, 0.2, relu)


@register_model("inception_resnet_v2")
class InceptionResNetV2(Model):
    """Residual Inception network; input 3x299x299, 1000 classes."""

    def __init__(self, model_id: str) -> None:
        super().__init__(model_id)
        self.title = "InceptionResNetV2"
        self.input_shape = (3, 299, 299)
        self.num_classes = 1000

    def build(self) -> gluon.HybridBlock:
        net = sequential(
            _c(32, 3, strides=2), _c(32, 3), _c(64, 3, padding=1), max_pool(),
            _c(80, 1), _c(192, 3), max_pool(),
            Concurrent(  # Mixed_5b: 35x35x320
                _c(96, 1),
                sequential(_c(48, 1), _c(64, 5, padding=2)),
                sequential(_c(64, 1), _c(96, 3, padding=1), _c(96, 3, padding=1)),
                sequential(avg_pool_same(), _c(64, 1)),
            ),
        )
        net.add(*[_block35() for _ in range(10)])
        net.add(Concurrent(  # Mixed_6a: 17x17x1088
            _c(384, 3, strides=2),
            sequential(_c(256, 1), _c(256, 3, padding=1), _c(384, 3, strides=2)),
            max_pool(),
        ))
        net.add(*[_block17() for _ in range(20)])
        net.add(Concurrent(  # Mixed_7a: 8x8x2080
            sequential(_c(256, 1), _c(384, 3, strides=2)),
            sequential(_c(256, 1), _c(288, 3, strides=2)),
            sequential(_c(256, 1), _c(288, 3, padding=1), _c(320, 3, strides=2)),
            max_pool(),
        ))
        net.add(*[_block8() for _ in range(9)], _block8(relu=False))
        net.add(
            _c(1536, 1), nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dropout(0.2),
            nn.Dense(self.num_classes),
        )
        return net
