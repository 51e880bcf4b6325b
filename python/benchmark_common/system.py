"""The interface a backend implements so that the harness can evaluate its model.

The backend is both of LoadGen's parties: the system under test (`submit`) and the query
sample library (`load`, `unload`, `label`). Samples are numbered 0 .. total_samples - 1: the
dataset's first `total_samples` samples in its order, or distinct synthetic samples.

A system computes `lanes` batches at once, each on a lane of its own: a stream of one of its
devices (lane i is on device i % devices, so that consecutive lanes alternate devices), or
a thread on the CPU. Every batch size the scenario can form is prepared on every lane before
LoadGen starts (`prepare`); `compilations` counts what had to be compiled, captured or
autotuned since, which is what the harness reports as `results.recompiles`.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple  # noqa: UP035 - Python 3.8 too

#: `submit(..., top=k)`'s answer: per sample, the k best classes (best first) and their
#: probabilities (softmax of the model's output), each a sequence of k numbers.
TopK = Tuple[Sequence[Sequence[int]], Sequence[Sequence[float]]]  # noqa: UP006


class InferenceSystem:
    """A model with its samples.

    `total_samples` is how many samples there are; `performance_samples` how many of them
    may be resident (loaded) at once; `num_classes` the model's number of classes; `lanes`
    how many batches it computes at once. The harness calls `submit` on a lane from one
    thread at a time, with one batch in flight per lane; the other methods from one thread.
    """

    title = "model"
    total_samples = 1
    performance_samples = 1
    num_classes = 1
    lanes = 1
    #: True where `submit` only starts a batch that a device runs meanwhile (a GPU): the
    #: harness then reports how much of a batch's time went to launching it.
    asynchronous = False

    def load(self, indices: Sequence[int]) -> None:
        """Make these samples resident (preprocessed, on the device); replaces earlier ones."""
        raise NotImplementedError

    def unload(self, indices: Sequence[int]) -> None:
        """Release these samples."""

    def submit(self, indices: Sequence[int], top: int = 0,
               lane: int = 0) -> Callable[[], Optional[TopK]]:  # noqa: UP006,UP045
        """Start one batch of resident samples on `lane`; return a function that waits for it.

        The function gives, with `top` > 0, the `top` best classes and their probabilities
        per sample (fewer when the model has fewer classes), else None. A device that runs
        asynchronously returns at once; a synchronous one (the CPU) may compute here.
        """
        raise NotImplementedError

    def infer(self, indices: Sequence[int], top: int = 0,
              lane: int = 0) -> Optional[TopK]:  # noqa: UP045
        """Run one batch on `lane` and wait for its answer (see `submit`)."""
        return self.submit(indices, top, lane)()

    def prepare(self, batch_sizes: Sequence[int], repeats: int,
                resident: Sequence[int]) -> None:
        """Make each batch size ready on every lane: compile, autotune, capture, then run it.

        Each size is run `repeats` times on each lane, from the resident samples `resident`
        (repeated when a size is larger). A batch of another size met later is padded up to
        the next prepared one; one larger than all of them is counted in `compilations`.
        """
        for lane in range(self.lanes):
            for size in batch_sizes:
                for _ in range(repeats):
                    self.infer([resident[i % len(resident)] for i in range(size)], lane=lane)

    def compilations(self) -> int:
        """How many compilations, graph captures or unprepared shapes the system has met.

        A counter: the harness reads it before and after LoadGen's run. 0 where nothing
        compiles (an eager model whose every shape was prepared).
        """
        return 0

    def bind_thread(self, lane: int) -> None:
        """Prepare the calling thread to serve `lane` (its device is per thread, say)."""

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
    (that many random samples, on the device), each in the backend's own form (PyTorch: one
    tensor per device). `pool` holds the resident samples, `rows` maps a sample's index to
    its row in `pool`.
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
