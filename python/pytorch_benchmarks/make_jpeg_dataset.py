"""Write an ImageNet-like folder of JPEG files, so real-data benchmarks need no download.

``python make_jpeg_dataset.py --output train/ --classes 100 --images_per_class 100``

One sub-folder per class (torchvision's ImageFolder layout), ``<class>/<image>.jpg``,
each image about 500x375 (the size of a typical ImageNet photo; every fourth one is
portrait), baseline JPEG at quality 90 with 4:2:0 chroma subsampling, as most of ImageNet
is. The pixels are a smooth random field with texture and grain on top, which compresses
like a photograph (about 100 KB a file), so decoding costs what it costs on real photos.
Every image is a function of (``--seed``, class, index): the same command writes the same
bytes. Files are written under a temporary name and renamed, so an interrupted run leaves
no partial JPEG behind; existing files are replaced.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image

#: Most ImageNet photos are 500 pixels on the long side, 4:3.
LONG_SIDE, SHORT_SIDE = 500, 375


def image_pixels(seed: int, label: int, index: int, width: int, height: int) -> np.ndarray:
    """HxWx3 uint8: low-frequency colour field + mid-frequency texture + fine grain."""
    rng = np.random.default_rng([seed, label, index])
    if index % 4 == 3:
        width, height = height, width  # some portraits, as in ImageNet
    field = Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8), "RGB")
    base = np.asarray(field.resize((width, height), Image.Resampling.BICUBIC), dtype=np.float32)
    texture = Image.fromarray(rng.integers(0, 256, (height // 4, width // 4), dtype=np.uint8))
    detail = np.asarray(texture.resize((width, height), Image.Resampling.BILINEAR), np.float32)
    grain = rng.normal(0.0, 16.0, (height, width, 1)).astype(np.float32)
    pixels = base * 0.75 + (detail[:, :, None] - 128.0) * 0.35 + grain + 32.0
    return np.clip(pixels, 0, 255).astype(np.uint8)


def write_image(path: Path, pixels: np.ndarray, quality: int) -> int:
    """Encode and write atomically (temporary name, then rename); return the file's size."""
    partial = path.with_name(f".{path.name}.partial")
    Image.fromarray(pixels, "RGB").save(partial, "JPEG", quality=quality, subsampling="4:2:0")
    os.replace(partial, path)
    return path.stat().st_size


def _write_class(job: tuple[Path, int, int, int, int, int, int]) -> tuple[int, int]:
    folder, seed, label, count, width, height, quality = job
    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    for index in range(count):
        pixels = image_pixels(seed, label, index, width, height)
        total += write_image(folder / f"img_{index:06d}.jpg", pixels, quality)
    return count, total


def make_dataset(
    output: Path,
    classes: int,
    images_per_class: int,
    *,
    seed: int = 0,
    width: int = LONG_SIDE,
    height: int = SHORT_SIDE,
    quality: int = 90,
    workers: int = 0,
) -> tuple[int, int]:
    """Write the folder; return (images, bytes). ``workers`` 0 = one process per core."""
    if output.exists() and not output.is_dir():
        raise ValueError(f"--output {output}: exists and is not a directory")
    output.mkdir(parents=True, exist_ok=True)
    jobs = [
        (output / f"class_{label:05d}", seed, label, images_per_class, width, height, quality)
        for label in range(classes)
    ]
    processes = min(workers or os.cpu_count() or 1, classes)
    if processes <= 1:
        results = [_write_class(job) for job in jobs]
    else:
        with ProcessPoolExecutor(processes) as pool:
            results = list(pool.map(_write_class, jobs))
    return sum(n for n, _ in results), sum(size for _, size in results)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the flags, write the folder, print what was written."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output", required=True, type=Path, help="folder to write (created)")
    p.add_argument("--classes", type=_positive, default=10, help="class sub-folders")
    p.add_argument("--images_per_class", type=_positive, default=100, help="images per class")
    p.add_argument("--width", type=_positive, default=LONG_SIDE, help="landscape width")
    p.add_argument("--height", type=_positive, default=SHORT_SIDE, help="landscape height")
    p.add_argument("--quality", type=int, choices=range(1, 96), default=90, metavar="1..95",
                   help="JPEG quality")
    p.add_argument("--seed", type=int, default=0, help="the images are a function of it")
    p.add_argument("--workers", type=int, default=0, help="processes (0: one per core)")
    a = p.parse_args(argv)
    try:
        images, size = make_dataset(a.output, a.classes, a.images_per_class, seed=a.seed,
                                    width=a.width, height=a.height, quality=a.quality,
                                    workers=a.workers)
    except (OSError, ValueError) as error:
        print(f"make_jpeg_dataset.py: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {images} images in {a.classes} classes to {a.output} "
          f"({size / 2**20:.1f} MiB, {size / images / 1024:.0f} KiB an image)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
