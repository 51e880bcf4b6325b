"""VGG 11/13/16/19 (configurations A, B, D, E of Simonyan and Zisserman), as torchvision."""

from __future__ import annotations

from mxnet import gluon

from .registry import Model, register_model

nn = gluon.nn

# id -> convolutions per stage; stage widths are 64, 128, 256, 512, 512.
_STAGES = {
    "vgg11": (1, 1, 2, 2, 2),
    "vgg13": (2, 2, 2, 2, 2),
    "vgg16": (2, 2, 3, 3, 3),
    "vgg19": (2, 2, 4, 4, 4),
}


@register_model(*_STAGES)
class VGG(Model):
    """Plain 3x3 convolution stacks without batch norm, and three dense layers."""

    def __init__(self, model_id: str) -> None:
        super().__init__(model_id)
        self.title = model_id.upper()
        self.input_shape = (3, 224, 224)
        self.num_classes = 1000

    def build(self) -> gluon.HybridBlock:
        net = nn.HybridSequential()
        for convs, channels in zip(_STAGES[self.model_id], (64, 128, 256, 512, 512)):
            for _ in range(convs):
                net.add(nn.Conv2D(channels, 3, padding=1, activation="relu"))
            net.add(nn.MaxPool2D(2, 2))
        net.add(
            nn.Flatten(),
            nn.Dense(4096, activation="relu"), nn.Dropout(0.5),
            nn.Dense(4096, activation="relu"), nn.Dropout(0.5),
            nn.Dense(self.num_classes),
        )
        return net
