"""The samples of a dataset in a fixed order: an image folder, a Caffe LMDB, a RecordIO file.

Every format gives `len(dataset)` samples numbered from 0, and `dataset.image(i)` (a Pillow
image), `dataset.label(i)` and `dataset.name(i)` for each. Orders and labels:

- image_folder: one sub-folder per class, classes numbered in sorted order, files sorted
  within their class (sub-folders walked in sorted order), only image suffixes; exactly
  torchvision's `ImageFolder`.
- caffe_lmdb: the records in key order (LMDB's cursor order) and their Datum labels, raw
  (CHW, BGR) or encoded images (docs/backends/pytorch.md).
- recordio: the records in file order, labels from their headers (MXNet's `pack_img`
  layout), read without MXNet.
"""

from __future__ import annotations

import os
import struct

from .caffe_datum import DatumError, decode_datum
from .preprocess import ImageError, open_image

FORMATS = ("image_folder", "caffe_lmdb", "recordio")
#: torchvision's IMG_EXTENSIONS.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


class DatasetError(ValueError):
    """A dataset that cannot be used: missing, empty, of another format, a broken record."""


def open_dataset(path: str, kind: str):
    """The dataset at `path` in format `kind` (one of FORMATS)."""
    if not os.path.exists(path):
        raise DatasetError(f"--data_dir {path}: no such file or directory")
    if kind == "image_folder":
        return ImageFolder(path)
    if kind == "caffe_lmdb":
        return CaffeLmdb(path)
    if kind == "recordio":
        return RecordIO(path)
    raise DatasetError(f"unknown dataset format {kind!r}; formats: {', '.join(FORMATS)}")


def detect_format(path: str) -> str:
    """The format of `path`: recordio, caffe_lmdb or image_folder.

    recordio for a .rec file (or a folder holding one), caffe_lmdb for a folder with
    data.mdb, else image_folder.
    """
    if os.path.isfile(path):
        return "recordio"
    if os.path.isfile(os.path.join(path, "data.mdb")):
        return "caffe_lmdb"
    if os.path.isdir(path) and any(name.endswith(".rec") for name in os.listdir(path)):
        return "recordio"
    return "image_folder"


class ImageFolder:
    """Images in one folder per class (see the module doc)."""

    def __init__(self, root: str) -> None:
        if not os.path.isdir(root):
            raise DatasetError(f"--data_dir {root} (image_folder): not a directory")
        classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
        if not classes:
            raise DatasetError(f"--data_dir {root} (image_folder): no class sub-folders")
        self.classes = classes
        self.samples: list[tuple[str, int]] = []
        for label, name in enumerate(classes):
            for folder, _, files in sorted(os.walk(os.path.join(root, name), followlinks=True)):
                for file in sorted(files):
                    if file.lower().endswith(IMAGE_SUFFIXES):
                        self.samples.append((os.path.join(folder, file), label))
        if not self.samples:
            raise DatasetError(f"--data_dir {root} (image_folder): no images in its class "
                               f"folders ({', '.join(IMAGE_SUFFIXES)})")

    def __len__(self) -> int:
        return len(self.samples)

    def image(self, index: int):
        path = self.samples[index][0]
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as error:
            raise DatasetError(f"{path}: cannot read it: {error.strerror}") from None
        return _decoded(data, path)

    def label(self, index: int) -> int:
        return self.samples[index][1]

    def name(self, index: int) -> str:
        return self.samples[index][0]


class CaffeLmdb:
    """Caffe Datum records in an LMDB (the `lmdb` package reads it)."""

    def __init__(self, path: str) -> None:
        if not os.path.isfile(os.path.join(path, "data.mdb")):
            raise DatasetError(f"--data_dir {path} (caffe_lmdb): no data.mdb in it")
        try:
            import lmdb
        except ImportError:
            raise DatasetError("caffe_lmdb datasets need the lmdb package (pip install "
                               "lmdb)") from None
        self.path = path
        self._env = lmdb.open(path, readonly=True, lock=False, readahead=False, subdir=True)
        with self._env.begin(write=False) as txn:
            self.keys = [key for key, _ in txn.cursor()]
        if not self.keys:
            raise DatasetError(f"--data_dir {path} (caffe_lmdb): the database holds no records")
        self._labels: dict = {}

    def __len__(self) -> int:
        return len(self.keys)

    def _datum(self, index: int):
        with self._env.begin(write=False) as txn:
            value = txn.get(self.keys[index])
        try:
            return decode_datum(value or b"")
        except DatumError as error:
            raise DatasetError(f"{self.name(index)}: not a Caffe Datum ({error})") from None

    def image(self, index: int):
        datum = self._datum(index)
        self._labels[index] = datum.label
        if datum.encoded:
            return _decoded(datum.data, self.name(index))
        return datum_image(datum, self.name(index))

    def label(self, index: int) -> int:
        if index not in self._labels:
            self._labels[index] = self._datum(index).label
        return self._labels[index]

    def name(self, index: int) -> str:
        return f"{self.path}#{self.keys[index].decode(errors='replace')}"


def datum_image(datum, name: str):
    """A raw Datum's pixels (uint8, CHW, BGR as Caffe stores them) as an RGB image."""
    import numpy as np
    from PIL import Image

    expected = datum.channels * datum.height * datum.width
    if len(datum.data) != expected or datum.channels not in (1, 3) or not expected:
        raise DatasetError(f"{name}: holds {len(datum.data)} bytes, not "
                           f"{datum.channels}x{datum.height}x{datum.width} pixels")
    chw = np.frombuffer(datum.data, dtype=np.uint8).reshape(datum.channels, datum.height,
                                                            datum.width)
    if datum.channels == 1:
        return Image.fromarray(np.ascontiguousarray(chw[0]), "L").convert("RGB")
    return Image.fromarray(np.ascontiguousarray(chw.transpose(1, 2, 0)[:, :, ::-1]), "RGB")


#: dmlc RecordIO: every record starts with this word, then (cflag << 29 | length).
RECORDIO_MAGIC = 0xCED7230A
#: MXNet's image record header: flag, label, id, id2 (`mxnet.recordio.IRHeader`).
IR_HEADER = struct.Struct("<IfQQ")


class RecordIO:
    """Image records of a RecordIO file (`im2rec`, `mxnet.recordio.pack_img`), in file order.

    A record longer than one chunk is stored in parts (cflag 1, 2..., 3) that were split
    where the payload held the magic word; the parts are joined with it again.
    """

    def __init__(self, path: str) -> None:
        if os.path.isdir(path):
            found = sorted(name for name in os.listdir(path) if name.endswith(".rec"))
            if len(found) != 1:
                raise DatasetError(f"--data_dir {path}: expected one .rec file in it, found "
                                   f"{len(found)}")
            path = os.path.join(path, found[0])
        self.path = path
        self.offsets: list[int] = []
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            position = 0
            while position < size:
                cflag, length = self._head(handle, position)
                if cflag in (0, 1):
                    self.offsets.append(position)
                position += 8 + length + (-length % 4)
                handle.seek(position)
        if not self.offsets:
            raise DatasetError(f"--data_dir {path} (recordio): no records in it")
        self._labels: dict = {}

    def _head(self, handle, position: int) -> tuple[int, int]:
        head = handle.read(8)
        if len(head) < 8:
            raise DatasetError(f"{self.path}: a record header is cut short at byte {position}")
        magic, word = struct.unpack("<II", head)
        if magic != RECORDIO_MAGIC:
            raise DatasetError(f"{self.path}: not a RecordIO file (no record at byte "
                               f"{position})")
        return word >> 29, word & ((1 << 29) - 1)

    def _record(self, index: int) -> bytes:
        parts = []
        with open(self.path, "rb") as handle:
            position = self.offsets[index]
            handle.seek(position)
            while True:
                cflag, length = self._head(handle, position)
                parts.append(handle.read(length))
                if cflag in (0, 3):
                    break
                position += 8 + length + (-length % 4)
                handle.seek(position)
        return struct.pack("<I", RECORDIO_MAGIC).join(parts)

    def _unpack(self, index: int) -> tuple[int, bytes]:
        record = self._record(index)
        if len(record) < IR_HEADER.size:
            raise DatasetError(f"{self.name(index)}: the record is too short for a header")
        flag, label, _, _ = IR_HEADER.unpack_from(record)
        start = IR_HEADER.size
        if flag > 0:  # `flag` labels follow the header; the first is the class
            (label,) = struct.unpack_from("<f", record, start)
            start += 4 * flag
        return int(label), record[start:]

    def __len__(self) -> int:
        return len(self.offsets)

    def image(self, index: int):
        label, data = self._unpack(index)
        self._labels[index] = label
        return _decoded(data, self.name(index))

    def label(self, index: int) -> int:
        if index not in self._labels:
            self._labels[index] = self._unpack(index)[0]
        return self._labels[index]

    def name(self, index: int) -> str:
        return f"{self.path}#{index}"


def _decoded(data: bytes, name: str):
    try:
        return open_image(data, name)
    except ImageError as error:
        raise DatasetError(str(error)) from None


def preprocessed(dataset, indices, size: int, threads: int = 0):
    """The samples `indices`, preprocessed (preprocess.py), as one float32 array (n, 3, s, s).

    Pillow releases the GIL while it decodes and resizes, so a few threads share the work.
    """
    import numpy as np

    from .preprocess import preprocess

    def one(index: int):
        return preprocess(dataset.image(index), size)

    indices = list(indices)
    workers = threads or min(8, os.cpu_count() or 1)
    if workers <= 1 or len(indices) < 2:
        arrays = [one(index) for index in indices]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=workers) as pool:
            arrays = list(pool.map(one, indices))
    return np.stack(arrays) if arrays else np.zeros((0, 3, size, size), np.float32)
