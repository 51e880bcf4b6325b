"""OverFeat, the "fast" model of Sermanet et al. 2013, as in convnet-benchmarks and DLBS."""

from __future__ import annotations

from mxnet import gluon

from .registry import Model, register_model

nn = gluon.nn


@register_model("overfeat")
class OverFeat(Model):
    """Five convolutions (96-256-512-1024-1024), max pooling, 3072-4096 dense layers."""

    def __init__(self, model_id: str) -> None:
        super().__init__(model_id)
        self.title = "OverFeat"
        self.input_shape = (3, 231, 231)
        self.num_classes = 1000

    def build(self) -> gluon.HybridBlock:
        net = nn.HybridSequential()
        net.add(
            nn.Conv2D(96, 11, strides=4, activation="relu"), nn.MaxPool2D(2, 2),
            nn.Conv2D(256, 5, activation="relu"), nn.MaxPool2D(2, 2),
            nn.Conv2D(512, 3, padding=1, activation="relu"),
            nn.Conv2D(1024, 3, padding=1, activation="relu"),
            nn.Conv2D(1024, 3, padding=1, activation="relu"), nn.MaxPool2D(2, 2),
            nn.Flatten(),
            nn.Dropout(0.5), nn.Dense(3072, activation="relu"),
            nn.Dropout(0.5), nn.Dense(4096, activation="relu"),
            nn.Dense(self.num_classes),
        )
        return net
