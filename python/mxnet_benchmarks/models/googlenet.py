"""GoogLeNet as in BVLC Caffe (Szegedy et al. 2014): LRN, ceil-mode pooling, no aux heads."""

from __future__ import annotations

from mxnet import gluon

from .layers import Concurrent, sequential
from .registry import Model, register_model

nn = gluon.nn

# (1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection) for each inception module.
_MODULES = {
    "3a": (64, 96, 128, 16, 32, 32), "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64), "4b": (160, 112, 224, 24, 64, 64),
    "4c": (128, 128, 256, 24, 64, 64), "4d": (112, 144, 288, 32, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128), "5b": (384, 192, 384, 48, 128, 128),
}


class _LRN(gluon.HybridBlock):
    def hybrid_forward(self, F, x):  # noqa: D102
        return F.LRN(x, nsize=5, alpha=0.0001, beta=0.75)


def _conv(channels: int, kernel: int, strides: int = 1, padding: int = 0) -> nn.Conv2D:
    return nn.Conv2D(channels, kernel, strides=strides, padding=padding, activation="relu")


def _inception(c1, c3r, c3, c5r, c5, cp) -> Concurrent:
    return Concurrent(
        _conv(c1, 1),
        sequential(_conv(c3r, 1), _conv(c3, 3, padding=1)),
        sequential(_conv(c5r, 1), _conv(c5, 5, padding=2)),
        sequential(nn.MaxPool2D(3, 1, 1, ceil_mode=True), _conv(cp, 1)),
    )


def _pool() -> nn.MaxPool2D:
    return nn.MaxPool2D(3, 2, ceil_mode=True)


@register_model("googlenet")
class GoogLeNet(Model):
    """The BVLC reference GoogLeNet (6,998,552 parameters)."""

    def __init__(self, model_id: str) -> None:
        super().__init__(model_id)
        self.title = "GoogleNet"
        self.input_shape = (3, 224, 224)
        self.num_classes = 1000

    def build(self) -> gluon.HybridBlock:
        net = sequential(
            _conv(64, 7, strides=2, padding=3), _pool(), _LRN(),
            _conv(64, 1), _conv(192, 3, padding=1), _LRN(), _pool(),
        )
        for name, spec in _MODULES.items():
            net.add(_inception(*spec))
            if name in ("3b", "4e"):
                net.add(_pool())
        net.add(nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dropout(0.4), nn.Dense(self.num_classes))
        return net
