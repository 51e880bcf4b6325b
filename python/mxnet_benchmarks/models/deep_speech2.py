"""DeepSpeech2 (Amodei et al. 2015): 2-D convolutions, bidirectional RNNs, CTC loss.

The layer choice is DLBS's default: two 2-D convolutions in the PaddlePaddle layout
(32 filters 11x41 stride 3x2 and 32 filters 11x21 stride 1x2, "same" padding, batch norm,
clipped ReLU), three bidirectional ReLU RNN layers of 2048 units whose directions are
concatenated, and a dense layer to 842 = 29 * 29 + 1 classes (bigram alphabet + blank).
Input: a spectrogram of 200 time steps x 161 frequency bins, as `1x200x161`.
"""

from __future__ import annotations

import numpy as np
from mxnet import gluon

from .registry import Model, register_model

nn = gluon.nn

# (channels, kernel, strides, padding) in (time, frequency).
_CONVS = (
    (32, (11, 41), (3, 2), (5, 20)),
    (32, (11, 21), (1, 2), (5, 10)),
)
_RNN_LAYERS = 3
_RNN_UNITS = 2048
#: Characters per synthetic transcript; short enough that CTC always has a valid alignment.
_LABEL_LENGTH = 20


def _out_len(length: int, kernel: int, stride: int, pad: int) -> int:
    return (length + 2 * pad - kernel) // stride + 1


class _ClippedReLU(gluon.HybridBlock):
    """min(max(x, 0), 20), the activation of the DeepSpeech2 paper."""

    def hybrid_forward(self, F, x):  # noqa: D102
        return F.clip(x, 0, 20)


class _DeepSpeech2Net(gluon.HybridBlock):
    def __init__(self, num_classes: int, rnn_units: int, rnn_layers: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.convs = nn.HybridSequential()
        for channels, kernel, strides, padding in _CONVS:
            self.convs.add(
                nn.Conv2D(channels, kernel, strides, padding, use_bias=False),
                nn.BatchNorm(), _ClippedReLU(),
            )
        self.rnn = gluon.rnn.RNN(
            rnn_units, rnn_layers, activation="relu", layout="NTC", bidirectional=True
        )
        self.classifier = nn.Dense(num_classes, flatten=False)

    def hybrid_forward(self, F, x):  # noqa: D102
        x = self.convs(x)                        # N, C, T', F'
        x = F.transpose(x, axes=(0, 2, 1, 3))     # N, T', C, F'
        x = F.reshape(x, shape=(0, 0, -1))        # N, T', C*F'
        return self.classifier(self.rnn(x))      # N, T', classes


@register_model("deep_speech2")
class DeepSpeech2(Model):
    """Speech recognition network trained with CTC; output is (batch, 67, 842)."""

    accepts_images = False

    def __init__(self, model_id: str, rnn_units: int = _RNN_UNITS,
                 rnn_layers: int = _RNN_LAYERS) -> None:
        super().__init__(model_id)
        self.rnn_units, self.rnn_layers = rnn_units, rnn_layers
        self.title = "DeepSpeech2"
        self.input_shape = (1, 200, 161)
        self.num_classes = 29 * 29 + 1
        length = self.input_shape[1]
        for _, kernel, strides, padding in _CONVS:
            length = _out_len(length, kernel[0], strides[0], padding[0])
        self.output_length = length

    def build(self) -> gluon.HybridBlock:
        return _DeepSpeech2Net(self.num_classes, self.rnn_units, self.rnn_layers)

    def output_shape(self, batch_size: int) -> tuple[int, ...]:
        return (batch_size, self.output_length, self.num_classes)

    def loss(self) -> gluon.loss.Loss:
        # Gluon's CTC puts the blank last: labels are 0 .. num_classes - 2.
        return gluon.loss.CTCLoss(layout="NTC", label_layout="NT")

    def synthetic_labels(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        shape = (batch_size, _LABEL_LENGTH)
        return rng.integers(0, self.num_classes - 1, size=shape).astype(np.float32)
