"""Inception v3 (torchvision's, without the auxiliary head) and Inception v4 (Szegedy 2016)."""

from __future__ import annotations

from mxnet import gluon

from .layers import Concurrent, avg_pool_same, conv_bn, max_pool, sequential
from .registry import Model, register_model

nn = gluon.nn


def _c(channels: int, kernel, strides=1, padding=0) -> nn.HybridSequential:
    return conv_bn(channels, kernel, strides, padding)


def _c17(channels: int) -> nn.HybridSequential:
    return _c(channels, (1, 7), padding=(0, 3))


def _c71(channels: int) -> nn.HybridSequential:
    return _c(channels, (7, 1), padding=(3, 0))


def _c13(channels: int) -> nn.HybridSequential:
    return _c(channels, (1, 3), padding=(0, 1))


def _c31(channels: int) -> nn.HybridSequential:
    return _c(channels, (3, 1), padding=(1, 0))


# ---- Inception v3 (torchvision.models.inception_v3, aux_logits=False) ---------------------

def _v3_a(pool_features: int) -> Concurrent:
    return Concurrent(
        _c(64, 1),
        sequential(_c(48, 1), _c(64, 5, padding=2)),
        sequential(_c(64, 1), _c(96, 3, padding=1), _c(96, 3, padding=1)),
        sequential(avg_pool_same(), _c(pool_features, 1)),
    )


def _v3_b() -> Concurrent:
    return Concurrent(
        _c(384, 3, strides=2),
        sequential(_c(64, 1), _c(96, 3, padding=1), _c(96, 3, strides=2)),
        max_pool(),
    )


def _v3_c(c7: int) -> Concurrent:
    return Concurrent(
        _c(192, 1),
        sequential(_c(c7, 1), _c17(c7), _c71(192)),
        sequential(_c(c7, 1), _c71(c7), _c17(c7), _c71(c7), _c17(192)),
        sequential(avg_pool_same(), _c(192, 1)),
    )


def _v3_d() -> Concurrent:
    return Concurrent(
        sequential(_c(192, 1), _c(320, 3, strides=2)),
        sequential(_c(192, 1), _c17(192), _c71(192), _c(192, 3, strides=2)),
        max_pool(),
    )


def _v3_e() -> Concurrent:
    return Concurrent(
        _c(320, 1),
        sequential(_c(384, 1), Concurrent(_c13(384), _c31(384))),
        sequential(_c(448, 1), _c(384, 3, padding=1), Concurrent(_c13(384), _c31(384))),
        sequential(avg_pool_same(), _c(192, 1)),
    )


def _inception3() -> nn.HybridSequential:
    return sequential(
        _c(32, 3, strides=2), _c(32, 3), _c(64, 3, padding=1), max_pool(),
        _c(80, 1), _c(192, 3), max_pool(),
        _v3_a(32), _v3_a(64), _v3_a(64),
        _v3_b(),
        _v3_c(128), _v3_c(160), _v3_c(160), _v3_c(192),
        _v3_d(),
        _v3_e(), _v3_e(),
        nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dropout(0.5),
    )


# ---- Inception v4 (Szegedy et al. 2016, figures 3-9) --------------------------------------

def _v4_stem() -> nn.HybridSequential:
    return sequential(
        _c(32, 3, strides=2), _c(32, 3), _c(64, 3, padding=1),
        Concurrent(max_pool(), _c(96, 3, strides=2)),
        Concurrent(
            sequential(_c(64, 1), _c(96, 3)),
            sequential(_c(64, 1), _c71(64), _c17(64), _c(96, 3)),
        ),
        Concurrent(_c(192, 3, strides=2), max_pool()),
    )


def _v4_a() -> Concurrent:
    return Concurrent(
        sequential(avg_pool_same(), _c(96, 1)),
        _c(96, 1),
        sequential(_c(64, 1), _c(96, 3, padding=1)),
        sequential(_c(64, 1), _c(96, 3, padding=1), _c(96, 3, padding=1)),
    )


def _v4_reduction_a() -> Concurrent:
    return Concurrent(
        max_pool(),
        _c(384, 3, strides=2),
        sequential(_c(192, 1), _c(224, 3, padding=1), _c(256, 3, strides=2)),
    )


def _v4_b() -> Concurrent:
    return Concurrent(
        sequential(avg_pool_same(), _c(128, 1)),
        _c(384, 1),
        sequential(_c(192, 1), _c17(224), _c71(256)),
        sequential(_c(192, 1), _c17(192), _c71(224), _c17(224), _c71(256)),
    )


def _v4_reduction_b() -> Concurrent:
    return Concurrent(
        max_pool(),
        sequential(_c(192, 1), _c(192, 3, strides=2)),
        sequential(_c(256, 1), _c17(256), _c71(320), _c(320, 3, strides=2)),
    )


def _v4_c() -> Concurrent:
    return Concurrent(
        sequential(avg_pool_same(), _c(256, 1)),
        _c(256, 1),
        sequential(_c(384, 1), Concurrent(_c13(256), _c31(256))),
        sequential(_c(384, 1), _c13(448), _c31(512), Concurrent(_c31(256), _c13(256))),
    )


def _inception4() -> nn.HybridSequential:
    net = sequential(_v4_stem())
    net.add(*[_v4_a() for _ in range(4)], _v4_reduction_a())
    net.add(*[_v4_b() for _ in range(7)], _v4_reduction_b())
    net.add(*[_v4_c() for _ in range(3)])
    net.add(nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dropout(0.2))
    return net


@register_model("inception3", "inception4")
class Inception(Model):
    """`inception3`: 23,834,568 parameters as torchvision's; `inception4`: the paper's v4."""

    def __init__(self, model_id: str) -> None:
        super().__init__(model_id)
        self.title = "InceptionV3" if model_id == "inception3" else "InceptionV4"
        self.input_shape = (3, 299, 299)
        self.num_classes = 1000

    def build(self) -> gluon.HybridBlock:
        net = _inception3() if self.model_id == "inception3" else _inception4()
        net.add(nn.Dense(self.num_classes))
        return net
