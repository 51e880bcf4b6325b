"""Top-1 and top-5 over a dataset, every sample exactly once, and the predictions file.

A model of five classes or fewer has every class among its five best: its top-5 would be 1
whatever it predicts. It is not reported; `results.top5_unavailable` says why.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence


class LabelsError(ValueError):
    """A class-name file that cannot be used."""


def read_labels(path: str, num_classes: int) -> list[str]:
    """Class names, one a line (line i names class i); blank lines at the end are ignored."""
    try:
        with open(path, encoding="utf-8") as handle:
            names = [line.rstrip("\r\n") for line in handle]
    except OSError as error:
        raise LabelsError(f"--labels {path}: cannot read it: {error.strerror}") from None
    except UnicodeDecodeError:
        raise LabelsError(f"--labels {path}: not UTF-8 text") from None
    while names and not names[-1].strip():
        names.pop()
    if len(names) < num_classes:
        raise LabelsError(f"--labels {path}: {len(names)} class names for a model of "
                          f"{num_classes} classes; for a model of {len(names)} classes, set "
                          f"exp.num_classes to {len(names)} (the backend's --num_classes "
                          f"{len(names)})")
    return names


def top_entries(classes: Sequence[int], probabilities: Sequence[float],
                names: Sequence[str] | None) -> list[dict[str, object]]:
    """The best classes as JSON objects: class, probability and (with names) name."""
    entries: list[dict[str, object]] = []
    for cls, probability in zip(classes, probabilities):
        entry: dict[str, object] = {"class": int(cls), "probability": float(probability)}
        if names is not None:
            entry["name"] = names[int(cls)]
        entries.append(entry)
    return entries


#: Top-5 counts a hit when the true class is among this many best predictions.
TOP_K = 5


def top5_unavailable(num_classes: int | None) -> str | None:
    """Why a model of `num_classes` classes has no meaningful top-5 (None: it has one)."""
    if num_classes is None or num_classes > TOP_K:
        return None
    return (f"the model has {num_classes} class{'es' if num_classes != 1 else ''}, all among "
            f"its {TOP_K} best: top-5 would be 1 whatever it predicts")


class AccuracyCounter:
    """Counts top-1/top-5 hits and how often each sample was classified."""

    def __init__(self, total: int, keep_predictions: bool,
                 num_classes: int | None = None) -> None:
        self.total = total
        self.num_classes = num_classes
        self.seen = [0] * total
        self.top1 = 0
        self.top5 = 0
        self.predictions: dict[int, tuple] | None = {} if keep_predictions else None

    def add(self, index: int, label: int, classes: Sequence[int],
            probabilities: Sequence[float]) -> None:
        """One sample's answer."""
        self.seen[index] += 1
        best = [int(c) for c in classes]
        self.top1 += bool(best) and best[0] == label
        self.top5 += label in best[:TOP_K]
        if self.predictions is not None:
            self.predictions[index] = (label, best, [float(p) for p in probabilities])

    def check_each_once(self) -> None:
        """Raise RuntimeError unless every sample was classified exactly once."""
        missing = sum(1 for count in self.seen if count == 0)
        repeated = sum(1 for count in self.seen if count > 1)
        if missing or repeated:
            raise RuntimeError(f"accuracy: {missing} of {self.total} samples were never "
                               f"classified and {repeated} more than once")

    def results(self) -> dict[str, float | str]:
        """`results.top1`, `results.top5` (fractions) and `results.num_samples`.

        Of a model of five classes or fewer, `results.top5_unavailable` instead of top-5.
        """
        results: dict[str, float | str] = {"results.top1": self.top1 / self.total,
                                           "results.num_samples": self.total}
        why = top5_unavailable(self.num_classes)
        if why is None:
            results["results.top5"] = self.top5 / self.total
        else:
            results["results.top5_unavailable"] = why
        return results

    def write_predictions(self, path: str, top: int, names: Sequence[str] | None,
                          sample_name) -> None:
        """One JSON line per sample, in sample order; written whole or not at all."""
        assert self.predictions is not None
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        partial = f"{path}.partial"
        with open(partial, "w", encoding="utf-8") as out:
            for index in sorted(self.predictions):
                label, classes, probabilities = self.predictions[index]
                line = {"sample": index, "name": sample_name(index), "label": label,
                        "top": top_entries(classes[:top], probabilities[:top], names)}
                out.write(json.dumps(line) + "\n")
        os.replace(partial, path)
