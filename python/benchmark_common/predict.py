"""Classify single image files (`--predict`): one protocol line per image, good or bad.

Each image prints `__predict.result__={"image": path, "top": [{"class", "probability"[,
"name"]}, ...]}`, or `{"image": path, "error": reason}` when it cannot be read or decoded;
the other images are still classified (docs/backends/protocol.md section 4). An image of
more pixels than Pillow's limit (`PIL.Image.MAX_IMAGE_PIXELS`, about 89 million: a small
file can decode to gigabytes, a "decompression bomb") is one of those errors, found from its
header before anything is decoded, as is one too large for the memory.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Callable, Sequence

from .accuracy import top_entries
from .preprocess import ImageError, open_image, preprocess
from .system import TopK


def predict_images(paths: Sequence[str], size: int, classify: Callable[[object, int], TopK],
                   top: int, names: Sequence[str] | None,
                   emit: Callable[[str, object], None]) -> int:
    """Classify each image; return how many could not be read.

    `classify(batch, top)` takes a float32 array (1, 3, size, size).
    """
    failed = 0
    for path in paths:
        try:
            batch = preprocess(_decoded(_read(path), path), size)[None]
        except OSError as error:
            emit("predict.result", {"image": path, "error": f"cannot read it: {error.strerror}"})
            failed += 1
            continue
        except ImageError as error:
            emit("predict.result", {"image": path, "error": str(error).split(": ", 1)[-1]})
            failed += 1
            continue
        classes, probabilities = classify(batch, top)
        emit("predict.result", {"image": path,
                                "top": top_entries(classes[0], probabilities[0], names)})
    return failed


#: Bytes of one image file: a photograph is megabytes; `/dev/zero` is endless.
MAX_IMAGE_BYTES = 256 * 2**20


def _read(path: str) -> bytes:
    """The bytes of a regular file of at most MAX_IMAGE_BYTES (else ImageError)."""
    # O_NONBLOCK: a FIFO is opened without waiting for a writer (and then refused).
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
        found = os.fstat(handle.fileno())
        if not stat.S_ISREG(found.st_mode):
            raise ImageError(f"{path}: not a regular file")
        if found.st_size > MAX_IMAGE_BYTES:
            raise ImageError(f"{path}: {found.st_size:,} bytes, more than the "
                             f"{MAX_IMAGE_BYTES:,} an image file may have")
        return handle.read(MAX_IMAGE_BYTES + 1)


def _decoded(data: bytes, path: str) -> object:
    """`open_image`, with a decompression bomb (or an image beyond the memory) an ImageError.

    Pillow raises DecompressionBombError above twice its limit and only warns between once
    and twice: here both are refused.
    """
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return open_image(data, path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        pixels = str(error).split("(", 1)[-1].split(" pixels", 1)[0]
        raise ImageError(f"{path}: the image has {pixels} pixels, more than the "
                         f"{Image.MAX_IMAGE_PIXELS:,} an image may have (a decompression "
                         f"bomb?)") from None
    except MemoryError:
        raise ImageError(f"{path}: the image does not fit in memory") from None
