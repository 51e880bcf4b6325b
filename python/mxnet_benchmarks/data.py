"""Input pipelines: synthetic batches resident on the devices, or RecordIO images.

Both hand out one (data, labels) pair per context and say how long the step waited for
them, so the runner can time the wait as part of the step and report it on its own.
"""

from __future__ import annotations

import glob
import os
import time

import mxnet as mx
import numpy as np

from .errors import BenchmarkError
from .models import Model
from .protocol import say

# ImageNet channel statistics (RGB, 0-255), the usual normalisation of ImageRecordIter.
_MEAN = (123.68, 116.779, 103.939)
_STD = (58.393, 57.12, 57.375)


class SyntheticBatches:
    """The same random batch every step, created once on each context: no input cost."""

    def __init__(self, model: Model, batch_size: int, contexts: list[mx.Context], dtype: str,
                 seed: int) -> None:
        rng = np.random.default_rng(seed)
        self._data = []
        self._labels = []
        for ctx in contexts:
            data = rng.standard_normal((batch_size,) + model.input_shape, dtype=np.float32)
            self._data.append(mx.nd.array(data, ctx=ctx, dtype=dtype))
            labels = model.synthetic_labels(batch_size, rng)
            self._labels.append(mx.nd.array(labels, ctx=ctx, dtype="float32"))

    def next(self) -> tuple[list[mx.nd.NDArray], list[mx.nd.NDArray], float]:
        """Per-context data and labels, and the wait for them in ms (always 0)."""
        return self._data, self._labels, 0.0


def find_record_file(data_dir: str) -> str:
    """`data_dir` itself if it is a .rec file, else `train.rec` or the only .rec inside it."""
    if os.path.isfile(data_dir):
        return data_dir
    if not os.path.isdir(data_dir):
        raise BenchmarkError(f"--data_dir {data_dir!r}: no such file or directory")
    train = os.path.join(data_dir, "train.rec")
    if os.path.isfile(train):
        return train
    found = sorted(glob.glob(os.path.join(data_dir, "*.rec")))
    if len(found) != 1:
        raise BenchmarkError(
            f"--data_dir {data_dir!r}: expected train.rec or exactly one .rec file, "
            f"found {len(found)}"
        )
    return found[0]


class RecordIOBatches:
    """JPEG records decoded by MXNet's ImageRecordIter (C++ threads), split over contexts.

    Images are resized (shorter side) and centre-cropped to the model's input, normalised
    with ImageNet statistics; each worker of a distributed job reads its own part.
    """

    def __init__(self, model: Model, data_dir: str, batch_size: int,
                 contexts: list[mx.Context], dtype: str, shuffle: bool, threads: int,
                 prefetch: int, num_parts: int, part_index: int, seed: int) -> None:
        if not model.accepts_images:
            raise BenchmarkError(
                f"model {model.model_id!r} does not take images; RecordIO input (--data_dir) "
                "is for the image models, use synthetic data (empty --data_dir)"
            )
        path = find_record_file(data_dir)
        threads, prefetch = max(threads, 1), max(prefetch, 1)
        say(f"RecordIO {path}: preprocess_threads={threads} prefetch_buffer={prefetch} "
            f"shuffle={shuffle} part {part_index + 1} of {num_parts}")
        channels, height, width = model.input_shape
        self._contexts = contexts
        self._dtype = dtype
        try:
            self._iter = mx.io.ImageRecordIter(
                path_imgrec=path, data_shape=(channels, height, width),
                batch_size=batch_size * len(contexts), resize=min(height, width),
                shuffle=shuffle, seed=seed, preprocess_threads=threads,
                prefetch_buffer=prefetch, num_parts=num_parts, part_index=part_index,
                mean_r=_MEAN[0], mean_g=_MEAN[1], mean_b=_MEAN[2],
                std_r=_STD[0], std_g=_STD[1], std_b=_STD[2],
            )
        except mx.base.MXNetError as error:
            # The message is MXNet's C++ backtrace; its last line says what went wrong.
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            reason = lines[-1] if lines else type(error).__name__
            raise BenchmarkError(f"cannot read RecordIO file {path!r}: {reason}") from error
        except StopIteration:  # the iterator reads its first batch at once
            raise BenchmarkError(f"--data_dir: {path!r} holds no readable image records "
                                 "(not a RecordIO file of JPEGs?)") from None

    def next(self) -> tuple[list[mx.nd.NDArray], list[mx.nd.NDArray], float]:
        """Per-context data and labels, and the time waited for the decoder in ms."""
        start = time.perf_counter()
        try:
            batch = self._iter.next()
        except StopIteration:  # end of an epoch: start the next one
            self._iter.reset()
            batch = self._iter.next()
        data = batch.data[0]
        data.wait_to_read()
        waited_ms = (time.perf_counter() - start) * 1000.0
        if self._dtype != "float32":
            data = data.astype(self._dtype)
        parts = mx.gluon.utils.split_and_load(data, self._contexts, even_split=True)
        labels = mx.gluon.utils.split_and_load(batch.label[0], self._contexts, even_split=True)
        return parts, labels, waited_ms
