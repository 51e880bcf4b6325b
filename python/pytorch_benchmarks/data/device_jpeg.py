"""JPEG batches decoded and augmented on the GPU (``--decode gpu``).

A producer thread reads the files of the next batches (a few reader threads), decodes each
batch with nvJPEG (``torchvision.io.decode_jpeg(..., device='cuda')``, which uses the GPU's
hardware JPEG engines where it has them, A100 and newer) and augments it on the device: the
ImageNet training transform (random resized crop, horizontal flip) or the inference one
(resize and centre crop), then the normalisation. It works on its own CUDA stream, up to
``prefetch`` batches ahead; the timed loop's stream waits for a batch's event, so the
decoding of the next batches overlaps the training step of this one.

Resampling is bilinear, without antialiasing (what ``F.interpolate(mode='bilinear')`` does
to each crop), in a fixed number of batched operations (``resample``): the host's work per
batch does not grow with the batch, so one thread keeps up with the GPU.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from ..errors import UserError
from .transforms import CROP_RATIO, CROP_SCALE, RESIZE_RATIO, normalize

_JPEG_MAGIC = b"\xff\xd8"


class Boxes:
    """Crop boxes of a batch (pixels, int64 arrays) and which outputs are mirrored."""

    def __init__(self, top, left, height, width, flip) -> None:
        self.top, self.left, self.height, self.width = top, left, height, width
        self.flip = flip


def random_resized_crops(
    heights: np.ndarray, widths: np.ndarray, rng: np.random.Generator
) -> Boxes:
    """RandomResizedCrop.get_params of torchvision for a whole batch, plus random flips.

    Ten tries per image of an area in CROP_SCALE and an aspect ratio in CROP_RATIO (log
    uniform); the first that fits is kept, else the centre crop clamped to the ratio range.
    """
    n, tries = len(heights), 10
    area = (heights * widths).astype(np.float64)[:, None]
    target = area * rng.uniform(CROP_SCALE[0], CROP_SCALE[1], (n, tries))
    log_ratio = np.log(CROP_RATIO)
    aspect = np.exp(rng.uniform(log_ratio[0], log_ratio[1], (n, tries)))
    w = np.rint(np.sqrt(target * aspect)).astype(np.int64)
    h = np.rint(np.sqrt(target / aspect)).astype(np.int64)
    fits = (w > 0) & (w <= widths[:, None]) & (h > 0) & (h <= heights[:, None])
    first = fits.argmax(axis=1)
    found = fits[np.arange(n), first]
    w, h = w[np.arange(n), first], h[np.arange(n), first]
    # No try fitted: the whole image, cut to the nearest allowed aspect ratio.
    ratio = widths / heights
    fallback_w = np.where(ratio > CROP_RATIO[1], np.rint(heights * CROP_RATIO[1]), widths)
    fallback_h = np.where(ratio < CROP_RATIO[0], np.rint(widths / CROP_RATIO[0]), heights)
    w = np.where(found, w, fallback_w).astype(np.int64)
    h = np.where(found, h, fallback_h).astype(np.int64)
    top = np.where(found, (rng.random(n) * (heights - h + 1)).astype(np.int64), (heights - h) // 2)
    left = np.where(found, (rng.random(n) * (widths - w + 1)).astype(np.int64), (widths - w) // 2)
    return Boxes(top, left, h, w, rng.random(n) < 0.5)


def centre_crops(heights: np.ndarray, widths: np.ndarray, size: int) -> Boxes:
    """The region that resizing the shorter side to size x 256/224 and centre-cropping keeps."""
    side = np.minimum(np.rint(np.minimum(heights, widths) / RESIZE_RATIO), np.minimum(
        heights, widths)).astype(np.int64)
    side = np.maximum(side, 1)
    return Boxes((heights - side) // 2, (widths - side) // 2, side, side,
                 np.zeros(len(heights), dtype=bool))


def resample(images: Sequence[torch.Tensor], boxes: Boxes, size: int) -> torch.Tensor:
    """Crop each CHW uint8 image to its box, resize to size x size, mirror where asked.

    Returns float32 NCHW pixels in 0..255 on the images' device. The result is
    ``F.interpolate(crop, (size, size), mode='bilinear', align_corners=False)`` of each
    crop (flipped where asked), made for the whole batch by a fixed number of operations: the
    images are concatenated into one flat buffer, and each output pixel gathers its four
    source pixels from it (PyTorch's bilinear source coordinate, (i + 0.5) x crop / size -
    0.5, clamped to the crop). Memory is bounded by the output's size, not the images'.
    """
    device = images[0].device
    flat = torch.cat([image.reshape(-1) for image in images])
    heights = np.array([image.shape[1] for image in images], dtype=np.int64)
    widths = np.array([image.shape[2] for image in images], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(3 * heights * widths)[:-1]])
    table = torch.from_numpy(np.stack([offsets, widths, heights * widths, boxes.top, boxes.left,
                                       boxes.height, boxes.width, boxes.flip.astype(np.int64)]))
    if device.type == "cuda":  # one asynchronous copy: the host never waits for the device
        table = table.pin_memory()
    offset, width, plane, top, left, crop_h, crop_w, flip = table.to(
        device, non_blocking=True)[:, :, None]
    steps = torch.arange(size, device=device, dtype=torch.float32)[None, :] + 0.5

    def taps(origin, extent, mirrored):
        """(first, second, weight of the second) source index of each output position."""
        extent_f = extent.float()
        src = torch.minimum((steps * extent_f / size - 0.5).clamp_(min=0.0), extent_f - 1)
        if mirrored is not None:
            src = torch.where(mirrored > 0, extent_f - 1 - src, src)
        first = src.floor()
        second = torch.minimum(first + 1, extent_f - 1)
        return origin + first.long(), origin + second.long(), src - first

    y0, y1, wy = taps(top, crop_h, None)
    x0, x1, wx = taps(left, crop_w, flip)
    channel = torch.arange(3, device=device)[None, :, None, None] * plane[:, :, None, None]
    rows0 = (offset + y0 * width)[:, None, :, None] + channel
    rows1 = (offset + y1 * width)[:, None, :, None] + channel
    cols0, cols1 = x0[:, None, None, :], x1[:, None, None, :]
    wx, wy = wx[:, None, None, :], wy[:, None, :, None]
    top_row = flat[rows0 + cols0].float() * (1 - wx) + flat[rows0 + cols1].float() * wx
    bottom_row = flat[rows1 + cols0].float() * (1 - wx) + flat[rows1 + cols1].float() * wx
    return top_row * (1 - wy) + bottom_row * wy


def read_jpeg(path: str) -> torch.Tensor:
    """A file's bytes as a uint8 tensor; anything but a JPEG is refused with its path."""
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as error:
        raise UserError(f"--data_dir: cannot read {path}: {error.strerror or error}") from None
    if data[:2].tobytes() != _JPEG_MAGIC:
        raise UserError(f"--decode gpu reads JPEG files only; {path} is not one "
                        "(use --decode cpu)")
    return torch.from_numpy(data)


class DeviceJpegSource:
    """Batches of (images, labels) decoded and augmented on the GPU, a few batches ahead.

    ``samples`` are (path, label) pairs; each replica reads its own shard (rank::world_size
    of each epoch's order), whole batches only. The producer thread starts with the first
    ``next()``, after the step has been built (and captured). The backend uses it on a GPU
    only (--decode gpu); on the CPU it runs the same pipeline without streams (the tests).
    """

    def __init__(
        self,
        samples: Sequence[tuple[str, int]],
        *,
        batch_size: int,
        size: int,
        training: bool,
        shuffle: bool,
        device: torch.device,
        dtype: torch.dtype,
        memory_format: torch.memory_format,
        rank: int = 0,
        world_size: int = 1,
        prefetch: int = 3,
        read_threads: int = 8,
        seed: int = 0,
    ) -> None:
        self.samples = list(samples)
        self.batch_size, self.size, self.training = batch_size, size, training
        self.shuffle, self.device, self.dtype = shuffle, device, dtype
        self.memory_format = memory_format
        self.rank, self.world_size, self.seed = rank, world_size, seed
        self.read_threads = read_threads
        self.epoch = 0
        self._queue: queue.Queue = queue.Queue(maxsize=prefetch)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the consumer side (the timed loop's thread) ------------------------------------------
    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The next batch, ready for the current stream (which waits for it on the device)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._produce, name="jpeg-decode",
                                            daemon=True)
            self._thread.start()
        item = self._queue.get()
        if isinstance(item, BaseException):
            self.close()
            if isinstance(item, UserError):
                raise item
            raise RuntimeError(f"GPU JPEG decoding failed: {item}") from item
        inputs, labels, ready = item
        if ready is not None:
            current = torch.cuda.current_stream(self.device)
            current.wait_event(ready)
            inputs.record_stream(current)  # not reused by the producer before the step is done
            labels.record_stream(current)
        return inputs, labels

    def close(self) -> None:
        """Stop the producer thread (idempotent)."""
        self._stop.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    # -- the producer thread ---------------------------------------------------------------
    def _batch_order(self) -> Iterator[list[int]]:
        """Sample indices of this replica's batches, epoch after epoch."""
        per_replica = len(self.samples) // self.world_size
        batches = per_replica // self.batch_size
        while True:
            order = np.arange(len(self.samples))
            if self.shuffle:
                order = np.random.default_rng([self.seed, self.epoch]).permutation(order)
            mine = order[self.rank::self.world_size][:per_replica]
            for b in range(batches):
                yield mine[b * self.batch_size:(b + 1) * self.batch_size].tolist()
            self.epoch += 1

    def _produce(self) -> None:
        try:
            on_gpu = self.device.type == "cuda"
            stream = torch.cuda.Stream(self.device) if on_gpu else None
            rng = np.random.default_rng([self.seed, self.rank])
            with ThreadPoolExecutor(self.read_threads, "jpeg-read") as readers, \
                    torch.cuda.stream(stream) if on_gpu else contextlib.nullcontext():
                order = self._batch_order()
                pending = self._read(readers, next(order))
                while not self._stop.is_set():
                    indices, files = pending
                    pending = self._read(readers, next(order))  # overlaps the decode below
                    batch = self._decode(indices, [f.result() for f in files], rng, stream)
                    self._put(batch)
        except BaseException as error:  # handed to the consumer, which raises it
            self._put(error)

    def _read(self, readers: ThreadPoolExecutor,
              indices: list[int]) -> tuple[list[int], list[Future]]:
        return indices, [readers.submit(read_jpeg, self.samples[i][0]) for i in indices]

    def _decode(
        self, indices: list[int], files: list[torch.Tensor], rng: np.random.Generator,
        stream: torch.cuda.Stream | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.cuda.Event | None]:
        from torchvision.io import ImageReadMode, decode_jpeg

        images = decode_jpeg(files, mode=ImageReadMode.RGB, device=self.device)
        heights = np.array([image.shape[1] for image in images], dtype=np.int64)
        widths = np.array([image.shape[2] for image in images], dtype=np.int64)
        boxes = (random_resized_crops(heights, widths, rng) if self.training
                 else centre_crops(heights, widths, self.size))
        pixels = resample(images, boxes, self.size)
        inputs = normalize(pixels, self.dtype, self.memory_format)
        labels = torch.tensor([self.samples[i][1] for i in indices], dtype=torch.long)
        if stream is None:  # the CPU (tests): every operation has finished already
            return inputs, labels, None
        labels = labels.pin_memory().to(self.device, non_blocking=True)
        ready = torch.cuda.Event()
        ready.record(stream)
        return inputs, labels, ready

    def _put(self, item: object) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
