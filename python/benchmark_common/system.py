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
