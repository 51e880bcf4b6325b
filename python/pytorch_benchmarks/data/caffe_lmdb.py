"""A Dataset over an LMDB of Caffe Datum records (raw or encoded images)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from .caffe_datum import decode_datum


class CaffeLmdbDataset(torch.utils.data.Dataset):
    """Images and labels from a Caffe LMDB; each loader worker opens its own environment."""

    def __init__(self, path: str | Path, transform: Callable[[Image.Image], torch.Tensor]) -> None:
        import lmdb  # only this data backend needs it

        self.path = str(path)
        self.transform = transform
        with lmdb.open(self.path, readonly=True, lock=False, readahead=False, subdir=True) as env:
            with env.begin(write=False) as txn:
                self.keys = [key for key, _ in txn.cursor()]
        self._env = None

    def __len__(self) -> int:
        """Number of records."""
        return len(self.keys)

    def _txn_get(self, key: bytes) -> bytes:
        if self._env is None:
            import lmdb

            self._env = lmdb.open(self.path, readonly=True, lock=False, readahead=False)
        with self._env.begin(write=False) as txn:
            value = txn.get(key)
        if value is None:
            raise KeyError(f"{self.path}: record {key!r} disappeared")
        return value

    def __getstate__(self) -> dict:
        """Workers get the key list, not the open environment (LMDB handles don't fork)."""
        state = dict(self.__dict__)
        state["_env"] = None
        return state

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        """Decode record ``index`` into a transformed image and its label."""
        datum = decode_datum(self._txn_get(self.keys[index]))
        if datum.encoded:
            image = Image.open(io.BytesIO(datum.data)).convert("RGB")
        else:
            expected = datum.channels * datum.height * datum.width
            if len(datum.data) != expected or datum.channels not in (1, 3):
                raise ValueError(
                    f"{self.path}: record {self.keys[index]!r} holds {len(datum.data)} bytes, "
                    f"not {datum.channels}x{datum.height}x{datum.width}"
                )
            chw = np.frombuffer(datum.data, dtype=np.uint8).reshape(
                datum.channels, datum.height, datum.width
            )
            hwc = chw.transpose(1, 2, 0)
            if datum.channels == 3:
                hwc = hwc[:, :, ::-1]  # Caffe stores BGR
                image = Image.fromarray(np.ascontiguousarray(hwc), "RGB")
            else:
                image = Image.fromarray(np.ascontiguousarray(hwc[:, :, 0]), "L").convert("RGB")
        return self.transform(image), datum.label
