"""The standard ImageNet transforms, sized for a model's input."""

from __future__ import annotations

from torchvision import transforms

_MEAN = (0.485, 0.456, 0.406)
_STD = (0.229, 0.224, 0.225)


def image_transform(size: int, training: bool) -> transforms.Compose:
    """Random resized crop and flip for training; resize and centre crop for inference."""
    if training:
        steps = [transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip()]
    else:
        steps = [transforms.Resize(int(round(size * 256 / 224))), transforms.CenterCrop(size)]
    return transforms.Compose(steps + [transforms.ToTensor(), transforms.Normalize(_MEAN, _STD)])
