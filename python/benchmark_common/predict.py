"""Classify single image files (`--predict`): one protocol line per image, good or bad.

Each image prints `__predict.result__={"image": path, "top": [{"class", "probability"[,
"name"]}, ...]}`, or `{"image": path, "error": reason}` when it cannot be read or decoded;
the other images are still classified (docs/backends/protocol.md section 4).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .accuracy import top_entries
from .preprocess import ImageError, open_image, preprocess
from .system import TopK


def predict_images(paths: Sequence[str], size: int, classify: Callable[[object, int], TopK],
                   top: int, names: Sequence[str] | None,
                   emit: Callable[[str, object], None]) -> int:
    """Classify each image; return how many could not be read.

    `classify(batch, top)` takes a float32 array (1, 3, size, size).
    """
    failed = 0
    for path in paths:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
            batch = preprocess(open_image(data, path), size)[None]
        except OSError as error:
            emit("predict.result", {"image": path, "error": f"cannot read it: {error.strerror}"})
            failed += 1
            continue
        except ImageError as error:
            emit("predict.result", {"image": path, "error": str(error).split(": ", 1)[-1]})
            failed += 1
            continue
        classes, probabilities = classify(batch, top)
        emit("predict.result", {"image": path,
                                "top": top_entries(classes[0], probabilities[0], names)})
    return failed
