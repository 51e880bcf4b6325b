"""AlexNet: the original single-tower network with LRN, and torchvision's "one weird trick"."""

from __future__ import annotations

from mxnet import gluon

from .registry import Model, register_model

nn = gluon.nn


class _LRN(gluon.HybridBlock):
    """Local response normalisation across channels (AlexNet's n=5, alpha=1e-4, beta=0.75)."""

    def hybrid_forward(self, F, x):  # noqa: D102
        return F.LRN(x, nsize=5, alpha=0.0001, beta=0.75, knorm=2)


def _classifier(net: nn.HybridSequential, num_classes: int) -> None:
    net.add(
        nn.Flatten(),
        nn.Dropout(0.5), nn.Dense(4096, activation="relu"),
        nn.Dropout(0.5), nn.Dense(4096, activation="relu"),
        nn.Dense(num_classes),
    )


@register_model("alexnet", "alexnet_owt")
class AlexNet(Model):
    """`alexnet`: Krizhevsky et al. 2012 without groups (96-256-384-384-256, LRN).

    `alexnet_owt`: torchvision's alexnet (64-192-384-256-256, no LRN), from "One weird trick
    for parallelizing convolutional neural networks" (61,100,840 parameters).
    """

    def __init__(self, model_id: str) -> None:
        super().__init__(model_id)
        self.title = "AlexNet" if model_id == "alexnet" else "AlexNetOWT"
        self.input_shape = (3, 227, 227)
        self.num_classes = 1000

    def build(self) -> gluon.HybridBlock:
        net = nn.HybridSequential()
        if self.model_id == "alexnet":
            net.add(
                nn.Conv2D(96, 11, strides=4, activation="relu"), _LRN(),
                nn.MaxPool2D(3, 2),
                nn.Conv2D(256, 5, padding=2, activation="relu"), _LRN(),
                nn.MaxPool2D(3, 2),
            )
            widths = (384, 384, 256)
        else:
            net.add(
                nn.Conv2D(64, 11, strides=4, padding=2, activation="relu"),
                nn.MaxPool2D(3, 2),
                nn.Conv2D(192, 5, padding=2, activation="relu"),
                nn.MaxPool2D(3, 2),
            )
            widths = (384, 256, 256)
        for channels in widths:
            net.add(nn.Conv2D(channels, 3, padding=1, activation="relu"))
        net.add(nn.MaxPool2D(3, 2))
        _classifier(net, self.num_classes)
        return net
