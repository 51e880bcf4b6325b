"""The one preprocessing of an image for every backend (docs/evaluation.md, "Preprocessing").

For a model whose input is `size` x `size`: convert to RGB; resize (bilinear, Pillow's
antialiasing) so that the shorter side is round(size x 256 / 224), the longer side scaled in
proportion and truncated; crop the centre `size` x `size` (offsets rounded); scale to [0, 1];
subtract the ImageNet mean and divide by its standard deviation, per channel; lay it out
channels first. These are torchvision's `Resize`, `CenterCrop`, `ToTensor` and `Normalize`,
step for step and in float32, so a plain torchvision loop gives the same numbers.
"""

from __future__ import annotations

import numpy as np

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def resized_shorter_side(size: int) -> int:
    """The shorter side before the centre crop: round(size x 256 / 224)."""
    return int(round(size * 256 / 224))


def preprocess(image, size: int) -> np.ndarray:
    """A Pillow image -> float32 array (3, size, size), normalised (see the module doc)."""
    from PIL import Image

    image = image.convert("RGB")
    width, height = image.size
    short = resized_shorter_side(size)
    if width <= height:
        new_width, new_height = short, int(short * height / width)
    else:
        new_width, new_height = int(short * width / height), short
    if (new_width, new_height) != (width, height):
        image = image.resize((new_width, new_height), Image.BILINEAR)
    left = int(round((new_width - size) / 2.0))
    top = int(round((new_height - size) / 2.0))
    image = image.crop((left, top, left + size, top + size))
    pixels = np.asarray(image, dtype=np.uint8).astype(np.float32) / np.float32(255.0)
    pixels = (pixels - MEAN) / STD
    return np.ascontiguousarray(pixels.transpose(2, 0, 1))


def open_image(data: bytes, name: str):
    """Decode image bytes with Pillow (fully, so that a broken file fails here)."""
    import io

    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except UnidentifiedImageError:
        # Its message names the in-memory buffer (<_io.BytesIO object at 0x...>), not the file.
        raise ImageError(f"{name}: not an image Pillow can read") from None
    except (OSError, ValueError) as error:
        raise ImageError(f"{name}: not an image Pillow can read ({error})") from None
    return image


class ImageError(ValueError):
    """A file or record that does not decode as an image."""
