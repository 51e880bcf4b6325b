"""ResNets 18-269 as torchvision builds them (v1.5: the stride sits on the 3x3 convolution)."""

from __future__ import annotations

from mxnet import gluon

from .layers import sequential
from .registry import Model, register_model

nn = gluon.nn

# id -> (bottleneck blocks?, blocks per stage). The depths of 200 and 269 are those of MXNet's
# image-classification example (and so of DLBS), built here with the torchvision block.
_DEPTHS = {
    "resnet18": (False, (2, 2, 2, 2)),
    "resnet34": (False, (3, 4, 6, 3)),
    "resnet50": (True, (3, 4, 6, 3)),
    "resnet101": (True, (3, 4, 23, 3)),
    "resnet152": (True, (3, 8, 36, 3)),
    "resnet200": (True, (3, 24, 36, 3)),
    "resnet269": (True, (3, 30, 48, 8)),
}


def _bn(zero_gamma: bool = False) -> nn.BatchNorm:
    return nn.BatchNorm(epsilon=1e-5, gamma_initializer="zeros" if zero_gamma else "ones")


class _Block(gluon.HybridBlock):
    """A residual block: `body(x) + shortcut(x)`, then ReLU."""

    def __init__(self, channels: int, strides: int, in_channels: int, bottleneck: bool,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        out_channels = channels * 4 if bottleneck else channels
        if bottleneck:
            self.body = sequential(
                nn.Conv2D(channels, 1, use_bias=False), _bn(), nn.Activation("relu"),
                nn.Conv2D(channels, 3, strides, 1, use_bias=False), _bn(),
                nn.Activation("relu"),
                nn.Conv2D(out_channels, 1, use_bias=False), _bn(),
            )
        else:
            self.body = sequential(
                nn.Conv2D(channels, 3, strides, 1, use_bias=False), _bn(),
                nn.Activation("relu"),
                nn.Conv2D(channels, 3, 1, 1, use_bias=False), _bn(),
            )
        if strides != 1 or in_channels != out_channels:
            self.shortcut = sequential(
                nn.Conv2D(out_channels, 1, strides, use_bias=False), _bn()
            )
        else:
            self.shortcut = None

    def hybrid_forward(self, F, x):  # noqa: D102
        residual = x if self.shortcut is None else self.shortcut(x)
        return F.relu(self.body(x) + residual)


@register_model(*_DEPTHS)
class ResNet(Model):
    """Deep residual networks (He et al. 2015); resnet50 has 25,557,032 parameters."""

    def __init__(self, model_id: str) -> None:
        super().__init__(model_id)
        self.title = "ResNet" + model_id[len("resnet"):]
        self.input_shape = (3, 224, 224)
        self.num_classes = 1000

    def build(self) -> gluon.HybridBlock:
        bottleneck, stages = _DEPTHS[self.model_id]
        net = sequential(
            nn.Conv2D(64, 7, 2, 3, use_bias=False), _bn(), nn.Activation("relu"),
            nn.MaxPool2D(3, 2, 1),
        )
        in_channels = 64
        for stage, blocks in enumerate(stages):
            channels = 64 * 2**stage
            for index in range(blocks):
                strides = 2 if stage > 0 and index == 0 else 1
                net.add(_Block(channels, strides, in_channels, bottleneck))
                in_channels = channels * 4 if bottleneck else channels
        net.add(nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dense(self.num_classes))
        return net
