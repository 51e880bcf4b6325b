"""Building blocks shared by several model files (no model is registered here)."""

from __future__ import annotations

from mxnet import gluon

nn = gluon.nn


class Concurrent(gluon.HybridBlock):
    """Runs its branches on the same input and concatenates their outputs on channels."""

    def __init__(self, *branches: gluon.HybridBlock, **kwargs) -> None:
        super().__init__(**kwargs)
        self._branches = []
        for index, branch in enumerate(branches):
            self.register_child(branch, f"branch{index}")
            self._branches.append(branch)

    def hybrid_forward(self, F, x):  # noqa: D102
        return F.concat(*[branch(x) for branch in self._branches], dim=1)


def sequential(*blocks: gluon.HybridBlock) -> nn.HybridSequential:
    """A HybridSequential of `blocks`."""
    seq = nn.HybridSequential()
    seq.add(*blocks)
    return seq


def conv_bn(channels: int, kernel, strides=1, padding=0, relu: bool = True,
            epsilon: float = 1e-3) -> nn.HybridSequential:
    """Convolution without bias, batch norm, optional ReLU (the Inception "BasicConv2d")."""
    seq = sequential(
        nn.Conv2D(channels, kernel, strides=strides, padding=padding, use_bias=False),
        nn.BatchNorm(epsilon=epsilon),
    )
    if relu:
        seq.add(nn.Activation("relu"))
    return seq


def max_pool(size: int = 3, strides: int = 2, padding: int = 0) -> nn.MaxPool2D:
    """Max pooling, by default the 3x3 stride-2 "valid" reduction used by Inception nets."""
    return nn.MaxPool2D(size, strides, padding)


def avg_pool_same() -> nn.AvgPool2D:
    """3x3 stride-1 average pooling that keeps the spatial size (padding counted)."""
    return nn.AvgPool2D(3, 1, 1)
