"""Which ONNX file a run uses: a user's `--model_file`, a cached export, or a fresh export.

This is the model layer: it knows files, not sessions or timing (session.py runs the file,
timing.py times it), so that other ways of running a model can reuse it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..export import cache_path, expected_metadata, export_in_child, log
from ..options import Options


@dataclass(frozen=True)
class ModelFile:
    """An ONNX file to run, where it came from, and the metadata it must hold."""

    path: Path
    origin: str  # "file" (--model_file), "cache" (exported earlier) or "exported" (now)
    expected: dict[str, str] = field(default_factory=dict)


def resolve_model(opts: Options, argv: Sequence[str]) -> ModelFile:
    """The ONNX file of `opts`, exporting the PyTorch model when the cache lacks it.

    `argv` is the backend's command line, handed to the exporting child as it is.
    """
    if opts.model_file:
        path = Path(opts.model_file)
        if not path.is_file():
            raise UserError(f"--model_file {opts.model_file!r}: no such file")
        return ModelFile(path, "file")
    path = cache_path(opts)
    if path.is_file():
        log(f"using the cached export {path}")
        return ModelFile(path, "cache", expected_metadata(opts))
    export_in_child(opts, argv)
    if not path.is_file():
        raise RuntimeError(f"the export of {opts.model} did not write {path}")
    return ModelFile(path, "exported", expected_metadata(opts))
