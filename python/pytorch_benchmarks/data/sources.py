"""Batch sources: what the timed loop calls once per step to get (inputs, labels) on the device.

Every source has ``next()`` and ``close()``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..errors import UserError
from ..models import ModelSpec
from .device_jpeg import DeviceJpegSource
from .transforms import image_transform, normalize


class DataError(UserError):
    """A dataset that cannot be used: missing, empty, wrong format, too small."""


class SyntheticSource:
    """One random batch, made once; with ``pinned_host`` it is copied to the device every step."""

    def __init__(
        self,
        spec: ModelSpec,
        batch_size: int,
        device: torch.device,
        dtype: torch.dtype,
        memory_format: torch.memory_format,
        location: str,
    ) -> None:
        generator = torch.Generator().manual_seed(0)
        inputs = torch.randn((batch_size, *spec.input_shape), generator=generator).to(dtype)
        labels = torch.randint(0, spec.num_classes, (batch_size,), generator=generator)
        if inputs.dim() == 4:
            inputs = inputs.contiguous(memory_format=memory_format)
        self.device = device
        self.from_host = location == "pinned_host" and device.type == "cuda"
        if self.from_host:
            self.inputs, self.labels = inputs.pin_memory(), labels.pin_memory()
        else:
            self.inputs, self.labels = inputs.to(device), labels.to(device)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch on the device (copied from pinned memory if so configured)."""
        if self.from_host:
            return (
                self.inputs.to(self.device, non_blocking=True),
                self.labels.to(self.device, non_blocking=True),
            )
        return self.inputs, self.labels

    def close(self) -> None:
        """Nothing runs in the background."""


class LoaderSource:
    """Batches from a DataLoader, epoch after epoch, moved to the device asynchronously."""

    def __init__(
        self,
        loader: torch.utils.data.DataLoader,
        device: torch.device,
        dtype: torch.dtype,
        memory_format: torch.memory_format,
    ) -> None:
        self.loader = loader
        self.device = device
        self.dtype = dtype
        self.memory_format = memory_format
        self.epoch = 0
        # The workers and the pinning thread start with the first batch, after the step is
        # built (a CUDA graph capture must not see other threads' CUDA calls).
        self._iter = None

    def next_host(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The next batch as the loader gives it (host memory); restarts at the end of an epoch."""
        if self._iter is None:
            self._iter = iter(self.loader)
        try:
            return next(self._iter)
        except StopIteration:
            self.epoch += 1
            sampler = self.loader.sampler
            if hasattr(sampler, "set_epoch"):
                sampler.set_epoch(self.epoch)
            self._iter = iter(self.loader)
            return next(self._iter)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The next batch on the device, normalised there, in the model's dtype and layout."""
        pixels, labels = self.next_host()
        pixels = pixels.to(self.device, non_blocking=True)
        inputs = normalize(pixels, self.dtype, self.memory_format)
        return inputs, labels.to(self.device, non_blocking=True)

    def close(self) -> None:
        """Nothing to stop: the DataLoader's workers end with the process."""


def _dataset(spec: ModelSpec, data_dir: str, backend: str, training: bool):
    """The torch Dataset for ``data_dir`` (Pillow decoding, uint8 results).

    Every problem is a DataError naming the path.
    """
    path = Path(data_dir)
    if not path.exists():
        raise DataError(f"--data_dir {data_dir}: no such directory")
    if not path.is_dir():
        raise DataError(f"--data_dir {data_dir}: not a directory")
    if not any(path.iterdir()):
        raise DataError(f"--data_dir {data_dir}: the directory is empty")
    if not spec.is_image_model:
        raise DataError(
            f"model {spec.model_id} takes input {spec.input_shape}, not images: "
            "use synthetic data (empty --data_dir)"
        )
    transform = image_transform(spec.input_shape[-1], training)
    if backend == "image_folder":
        from torchvision.datasets import ImageFolder

        try:
            return ImageFolder(str(path), transform=transform)
        except (FileNotFoundError, RuntimeError) as exc:
            raise DataError(f"--data_dir {data_dir} (image_folder): {exc}") from exc
    if backend == "caffe_lmdb":
        if not (path / "data.mdb").is_file():
            raise DataError(f"--data_dir {data_dir} (caffe_lmdb): no data.mdb in it")
        from .caffe_lmdb import CaffeLmdbDataset

        dataset = CaffeLmdbDataset(path, transform)
        if len(dataset) == 0:
            raise DataError(f"--data_dir {data_dir} (caffe_lmdb): the database holds no records")
        return dataset
    raise DataError(f"unknown --data_backend {backend!r}")


def make_loader_source(
    spec: ModelSpec,
    *,
    data_dir: str,
    backend: str,
    training: bool,
    batch_size: int,
    shuffle: bool,
    num_workers: int,
    device: torch.device,
    dtype: torch.dtype,
    memory_format: torch.memory_format,
    world_size: int,
    rank: int,
    decode: str = "cpu",
) -> LoaderSource | DeviceJpegSource:
    """The source of a real dataset, sharded over the replicas when there are several.

    ``decode`` cpu: a DataLoader whose ``num_workers`` processes decode with Pillow;
    gpu: nvJPEG and the augmentation on the device (image_folder of JPEG files, CUDA only).
    """
    if decode == "gpu" and device.type != "cuda":
        raise DataError("--decode gpu decodes on a CUDA device (use --decode cpu, or --device gpu)")
    if decode == "gpu" and backend != "image_folder":
        raise DataError(f"--decode gpu reads JPEG files of an image_folder, not {backend} "
                        "(use --decode cpu)")
    dataset = _dataset(spec, data_dir, backend, training)
    per_replica = len(dataset) // world_size
    if per_replica < batch_size:
        raise DataError(
            f"--data_dir {data_dir}: {len(dataset)} samples give {per_replica} per replica, "
            f"fewer than --batch_size {batch_size}"
        )
    if decode == "gpu":
        return DeviceJpegSource(
            dataset.samples, batch_size=batch_size, size=spec.input_shape[-1], training=training,
            shuffle=shuffle, device=device, dtype=dtype, memory_format=memory_format, rank=rank,
            world_size=world_size)
    sampler = None
    if world_size > 1:
        sampler = torch.utils.data.DistributedSampler(
            dataset, num_replicas=world_size, rank=rank, shuffle=shuffle, drop_last=True
        )
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle and sampler is None,
        sampler=sampler,
        num_workers=num_workers,
        pin_memory=device.type == "cuda",
        drop_last=True,
        persistent_workers=num_workers > 0,
        prefetch_factor=4 if num_workers > 0 else None,
    )
    return LoaderSource(loader, device, dtype, memory_format)
