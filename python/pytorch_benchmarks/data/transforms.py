"""The standard ImageNet transforms, sized for a model's input.

The host (DataLoader workers) does the geometry on 8-bit pixels and hands over uint8 tensors;
the division by 255 and the normalisation run where the batch lands (``normalize``), on the
device: a quarter of the bytes to collate, pin and copy, and no float work in the workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from torchvision import transforms

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
#: RandomResizedCrop's ranges (torchvision's defaults, the ImageNet training recipe).
CROP_SCALE = (0.08, 1.0)
CROP_RATIO = (3.0 / 4.0, 4.0 / 3.0)
#: Inference: resize the shorter side to size x 256/224, then centre-crop size.
RESIZE_RATIO = 256.0 / 224.0


def image_transform(size: int, training: bool) -> transforms.Compose:
    """PIL image -> uint8 CHW tensor: random resized crop and flip, or resize and centre crop."""
    from torchvision import transforms  # only real data needs it (models/resnet.py says why)

    if training:
        steps = [transforms.RandomResizedCrop(size, CROP_SCALE, CROP_RATIO),
                 transforms.RandomHorizontalFlip()]
    else:
        steps = [transforms.Resize(int(round(size * RESIZE_RATIO))), transforms.CenterCrop(size)]
    return transforms.Compose(steps + [transforms.PILToTensor()])


_CONSTANTS: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def _shift_and_scale(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """255 x mean and 255 x std as (1, 3, 1, 1) tensors, made once per device."""
    if device not in _CONSTANTS:
        shift = torch.tensor([255.0 * m for m in MEAN]).view(1, 3, 1, 1)
        scale = torch.tensor([255.0 * s for s in STD]).view(1, 3, 1, 1)
        _CONSTANTS[device] = (shift.to(device), scale.to(device))
    return _CONSTANTS[device]


def normalize(
    pixels: torch.Tensor, dtype: torch.dtype, memory_format: torch.memory_format
) -> torch.Tensor:
    """uint8 (or 0-255 float) NCHW pixels -> normalised ``dtype`` in ``memory_format``."""
    shift, scale = _shift_and_scale(pixels.device)
    batch = (pixels.float() - shift) / scale
    return batch.to(dtype=dtype, memory_format=memory_format)
