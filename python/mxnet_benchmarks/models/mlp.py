"""Fully connected networks of the original DLBS: deep_mnist, sensor_net, acoustic_model."""

from __future__ import annotations

from mxnet import gluon

from .registry import Model, register_model

# id -> (title, inputs, hidden layer sizes, classes), as in HPE DLBS.
_SPECS = {
    "deep_mnist": ("DeepMNIST", 784, (2500, 2000, 1500, 1000, 500), 10),
    "sensor_net": ("SensorNet", 784, (1024, 1024, 1024), 16),
    "acoustic_model": ("AcousticModel", 540, (2048,) * 5, 8192),
}


@register_model(*_SPECS)
class MultiLayerPerceptron(Model):
    """Dense layers with ReLU, then a linear classifier; inputs are flat feature vectors."""

    accepts_images = False

    def __init__(self, model_id: str) -> None:
        super().__init__(model_id)
        self.title, inputs, self.hidden, self.num_classes = _SPECS[model_id]
        self.input_shape = (inputs,)

    def build(self) -> gluon.HybridBlock:
        net = gluon.nn.HybridSequential()
        for units in self.hidden:
            net.add(gluon.nn.Dense(units, activation="relu"))
        net.add(gluon.nn.Dense(self.num_classes))
        return net
