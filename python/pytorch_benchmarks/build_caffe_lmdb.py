"""Build a Caffe LMDB (``Datum`` records) from an image folder, as Caffe's convert_imageset did.

``python build_caffe_lmdb.py --image_folder train/ --output train_lmdb [--raw --resize 256]``

The folder has one sub-folder per class (the ImageFolder layout); labels are the classes'
indices in sorted order. By default each record holds the image file's bytes (``encoded``);
``--raw`` decodes, resizes (``--resize``: the shorter side; 0 keeps the size) and stores
uint8 pixels, CHW, BGR, as convert_imageset does without ``--encoded``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from pytorch_benchmarks.data.caffe_datum import Datum, encode_datum  # noqa: E402

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}


def list_images(folder: Path) -> list[tuple[Path, int]]:
    """(path, label) for every image, classes in sorted order; raises if there are none."""
    if not folder.is_dir():
        raise FileNotFoundError(f"--image_folder {folder}: no such directory")
    classes = sorted(entry.name for entry in folder.iterdir() if entry.is_dir())
    if not classes:
        raise ValueError(f"--image_folder {folder}: no class sub-folders")
    samples = []
    for label, name in enumerate(classes):
        for path in sorted((folder / name).rglob("*")):
            if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file():
                samples.append((path, label))
    if not samples:
        raise ValueError(f"--image_folder {folder}: no images in its class folders")
    return samples


def make_datum(path: Path, label: int, raw: bool, resize: int) -> Datum:
    """One record: the file's bytes (encoded) or decoded BGR CHW pixels."""
    if not raw:
        with Image.open(path) as image:
            image.verify()  # refuse files the reader could not decode later
        return Datum(data=path.read_bytes(), label=label, encoded=True)
    with Image.open(path) as image:
        rgb = image.convert("RGB")
    if resize:
        scale = resize / min(rgb.size)
        rgb = rgb.resize((max(1, round(rgb.width * scale)), max(1, round(rgb.height * scale))))
    hwc = np.asarray(rgb, dtype=np.uint8)[:, :, ::-1]  # RGB -> BGR
    chw = np.ascontiguousarray(hwc.transpose(2, 0, 1))
    return Datum(
        channels=3, height=chw.shape[1], width=chw.shape[2], data=chw.tobytes(), label=label
    )


def build(
    image_folder: Path,
    output: Path,
    raw: bool,
    resize: int,
    shuffle: bool,
    seed: int,
    map_size_gib: float = 1024.0,
) -> int:
    """Write the database record by record (committing every 1000); return the count."""
    import lmdb

    samples = list_images(image_folder)
    if shuffle:
        random.Random(seed).shuffle(samples)
    if output.exists() and any(output.iterdir()):
        raise FileExistsError(f"--output {output}: exists and is not empty")
    output.mkdir(parents=True, exist_ok=True)
    # LMDB reserves its maximum size up front as address space; the file grows as written.
    with lmdb.open(str(output), map_size=int(map_size_gib * 2**30)) as env:
        txn = env.begin(write=True)
        try:
            for index, (path, label) in enumerate(samples):
                key = f"{index:08d}_{path.relative_to(image_folder).as_posix()}".encode()
                txn.put(key, encode_datum(make_datum(path, label, raw, resize)))
                if index % 1000 == 999:
                    txn.commit()
                    txn = env.begin(write=True)
            txn.commit()
        except BaseException:
            txn.abort()
            raise
    return len(samples)


def lmdb_error() -> type[Exception]:
    """The base exception of lmdb (a full map, a bad path); OSError when lmdb is missing."""
    try:
        import lmdb
    except ImportError:
        return OSError
    return lmdb.Error


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image_folder", required=True, type=Path, help="one sub-folder per class")
    p.add_argument("--output", required=True, type=Path, help="the LMDB directory to create")
    p.add_argument("--raw", action="store_true", help="store decoded pixels, not file bytes")
    p.add_argument("--resize", type=int, default=0, help="--raw: shorter side in pixels")
    p.add_argument("--shuffle", action="store_true", help="shuffle the record order")
    p.add_argument("--seed", type=int, default=0, help="seed for --shuffle")
    p.add_argument(
        "--map_size_gib", type=float, default=1024.0, help="LMDB's maximum size (address space)"
    )
    a = p.parse_args(argv)
    try:
        count = build(
            a.image_folder, a.output, a.raw, a.resize, a.shuffle, a.seed, a.map_size_gib
        )
    except (OSError, ValueError, lmdb_error()) as exc:
        print(f"build_caffe_lmdb: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {count} records to {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
