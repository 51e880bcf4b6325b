"""Writing results out: atomic files, experiments as JSON or CSV."""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Sequence
from typing import Any

import orjson

from dlbs.errors import ResultsError


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one.

    A temporary file in the same folder is written, fsync'ed and renamed over `path`.
    """
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    payload = data.encode() if isinstance(data, str) else data
    try:
        os.makedirs(folder, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.")
    except OSError as error:
        raise ResultsError(f"cannot write {target}: {error.strerror or error}") from error
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(payload)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except OSError as error:
        _remove_quietly(temporary)
        raise ResultsError(f"cannot write {target}: {error.strerror or error}") from error
    except BaseException:
        _remove_quietly(temporary)
        raise


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def to_json(document: Any) -> str:
    """Indented JSON, keys in the order they were read; NaN and Infinity become null."""
    return orjson.dumps(document, default=str, option=orjson.OPT_INDENT_2).decode() + "\n"


def experiment_columns(experiments: Sequence[dict[str, Any]]) -> list[str]:
    """Every key of `experiments`: exp.id, then exp.*, then results.*, then the rest."""
    keys: set[str] = set()
    for experiment in experiments:
        keys.update(experiment)

    def order(key: str) -> tuple[int, str]:
        if key == "exp.id":
            return (0, key)
        if key.startswith("exp."):
            return (1, key)
        if key.startswith("results."):
            return (2, key)
        return (3, key)

    return sorted(keys, key=order)


def csv_cell(value: Any) -> str:
    """A value as a CSV cell: text as is, lists and objects as JSON, None as empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=str).decode()


def experiments_to_csv(experiments: Sequence[dict[str, Any]]) -> str:
    """One row per experiment, one column per key (see `experiment_columns`)."""
    columns = experiment_columns(experiments)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for experiment in experiments:
        writer.writerow([csv_cell(experiment.get(column)) for column in columns])
    return buffer.getvalue()
