"""The interface a backend implements so that the harness can evaluate its model.

The backend is both of LoadGen's parties: the system under test (`infer`) and the query
sample library (`load`, `unload`, `label`). Samples are numbered 0 .. total_samples - 1: the
dataset's first `total_samples` samples in its order, or distinct synthetic samples.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple  # noqa: UP035 - Python 3.8 too

#: `infer(..., top=k)`'s answer: per sample, the k best classes (best first) and their
#: probabilities (softmax of the model's output), each a sequence of k numbers.
TopK = Tuple[Sequence[Sequence[int]], Sequence[Sequence[float]]]  # noqa: UP006


class InferenceSystem:
    """A model with its samples; every method is called from one thread at a time.

    `total_samples` is how many samples there are; `performance_samples` how many of them
    may be resident (loaded) at once; `num_classes` the model's number of classes.
    """

    title = "model"
    total_samples = 1
    performance_samples = 1
    num_classes = 1

    def load(self, indices: Sequence[int]) -> None:
        """Make these samples resident (preprocessed, on the device); replaces earlier ones."""
        raise NotImplementedError

    def unload(self, indices: Sequence[int]) -> None:
        """Release these samples."""

    def infer(self, indices: Sequence[int], top: int = 0) -> TopK | None:
        """Run the model on one batch of resident samples and wait until it has finished.

        With `top` > 0, return the `top` best classes and their probabilities per sample
        (fewer when the model has fewer classes); else return None.
        """
        raise NotImplementedError

    def submit(self, indices: Sequence[int],
               top: int = 0) -> Callable[[], Optional[TopK]]:  # noqa: UP006,UP045
        """Start one batch and return a function that waits for it and gives `infer`'s answer.

        The harness keeps two batches in flight: while the device computes one, the host
        completes the previous batch's samples with LoadGen and starts the next, so that
        neither side waits for the other (offline, server). A backend whose device runs
        asynchronously overrides this; the default runs the batch to its end at once.
        """
        answer = self.infer(indices, top)
        return lambda: answer

    def warm_up(self, batch_sizes: Sequence[int], repeats: int) -> None:
        """Run each batch size `repeats` times (compilation, autotuning, graph capture)."""
        for size in batch_sizes:
            for _ in range(repeats):
                self.infer(list(range(size)))

    def bind_thread(self) -> None:
        """Prepare the calling thread for `infer` (a thread of its own serves `server`)."""

    def label(self, index: int) -> int:
        """The true class of a sample."""
        raise NotImplementedError

    def sample_name(self, index: int) -> str:
        """A sample's name for the predictions file (its file, its record), or ""."""
        return ""


#: Samples of a dataset resident at once (LoadGen's performance sample count).
RESIDENT_SAMPLES = 1024
#: Distinct synthetic samples when --num_samples is -1 (at least one batch).
SYNTHETIC_SAMPLES = 256


class ResidentSamples(InferenceSystem):
    """The query sample library of a framework backend: resident samples on its device.

    The samples are the first `total_samples` of a dataset (preprocessed by
    `datasets.preprocessed` and put on the device as LoadGen loads them, at most
    `RESIDENT_SAMPLES` at once), or distinct synthetic samples, all resident from the start
    (class i % classes). A backend calls `open_samples` from its constructor and gives
    `to_device` (a float32 numpy array of images -> its device's batch) and `synthetic`
    (that many random samples, on the device). `pool` holds the resident samples, `rows`
    maps a sample's index to its row in `pool`.
    """

    dataset = None
    pool = None
    image_size = 224

    def open_samples(self, dataset, data_dir: str, requested: int, batch_size: int) -> None:
        """Size the library: `dataset` (opened from `data_dir`) or synthetic (None)."""
        from .datasets import DatasetError

        self.dataset = dataset
        self.rows = {}
        if dataset is not None:
            available = len(dataset)
            if requested > available:
                raise DatasetError(f"--num_samples {requested}, but --data_dir {data_dir} "
                                   f"holds {available} samples")
            self.total_samples = available if requested < 0 else requested
            self.performance_samples = min(self.total_samples,
                                           max(RESIDENT_SAMPLES, batch_size))
        else:
            self.total_samples = requested if requested > 0 else max(SYNTHETIC_SAMPLES,
                                                                     batch_size)
            self.performance_samples = self.total_samples
            self.pool = self.synthetic(self.total_samples)
            self.rows = {index: index for index in range(self.total_samples)}

    def to_device(self, images):
        """A float32 numpy array of preprocessed images as a batch on the device."""
        raise NotImplementedError

    def synthetic(self, count: int):
        """`count` distinct random samples of the model's input shape, on the device."""
        raise NotImplementedError

    def load(self, indices: Sequence[int]) -> None:
        if self.dataset is None:
            return  # every synthetic sample is resident
        from .datasets import preprocessed

        self.pool = None
        self.pool = self.to_device(preprocessed(self.dataset, indices, self.image_size))
        self.rows = {index: row for row, index in enumerate(indices)}

    def unload(self, indices: Sequence[int]) -> None:
        if self.dataset is not None:
            self.pool, self.rows = None, {}

    def label(self, index: int) -> int:
        if self.dataset is None:
            return index % self.num_classes
        return self.dataset.label(index)

    def sample_name(self, index: int) -> str:
        return self.dataset.name(index) if self.dataset is not None else f"synthetic_{index}"
