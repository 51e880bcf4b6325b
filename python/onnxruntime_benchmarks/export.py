"""The PyTorch backend's models, exported to ONNX into a cache (torch, onnx, onnxscript).

One file per model, dtype, batch and weights (the seed of the random initialisation):
`<cache_dir>/<model>-<dtype>-b<batch>-seed<seed>.onnx`. The batch is fixed in the graph, as
inference engines prefer. A file is written under a temporary name in the cache folder and
renamed into place (an atomic rename on POSIX), so two runs exporting the same model at once
never see half a file: each renames a complete one. The file's metadata names what it holds
(`dlbs.model`, `dlbs.dtype`, `dlbs.batch`, `dlbs.seed`, `dlbs.title`, `dlbs.torch`), which
the session checks when it reuses it.

torch is imported only here, and only when a model has to be exported: a cached file or a
user's `--model_file` runs without it.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from .errors import UserError
from .options import Options

_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
#: The folder name of the PyTorch backend, looked for beside this backend's folder.
PYTORCH_BACKEND = "pytorch_benchmarks"


def log(message: str) -> None:
    """An informational line (not a protocol key)."""
    print(f"[onnxruntime_benchmarks] {message}", flush=True)


def expected_metadata(opts: Options) -> dict[str, str]:
    """What a cached file of these options must say it holds."""
    return {"dlbs.model": opts.model, "dlbs.dtype": opts.dtype,
            "dlbs.batch": str(opts.batch_size), "dlbs.seed": str(opts.seed)}


def cache_path(opts: Options) -> Path:
    """The cache file of the model, dtype, batch and seed of `opts`."""
    if not _SAFE_ID.fullmatch(opts.model):
        raise UserError(f"--model {opts.model!r}: not a model id (letters, digits, _ . -)")
    return Path(opts.cache_dir) / f"{opts.model}-{opts.dtype}-b{opts.batch_size}-seed{opts.seed}.onnx"


def pytorch_backend_dir(opts: Options) -> Path:
    """The PyTorch backend's folder: --pytorch_backend, else beside this backend's folder."""
    if opts.pytorch_backend:
        return Path(opts.pytorch_backend)
    return Path(__file__).resolve().parent.parent / PYTORCH_BACKEND


def _import_torch():
    try:
        import torch
    except ImportError as error:
        raise UserError(f"exporting a PyTorch model to ONNX needs torch, onnx and onnxscript "
                        f"({error}); install them, or run a .onnx file with --model_file"
                        ) from None
    for module in ("onnx", "onnxscript"):
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise UserError(f"torch.onnx.export needs {module} ({error}); install it, or run "
                            f"a .onnx file with --model_file") from None
    return torch


def model_registry(opts: Options):
    """The PyTorch backend's `models` package (its registry of model ids)."""
    folder = pytorch_backend_dir(opts).resolve()
    if not (folder / "models" / "registry.py").is_file():
        raise UserError(f"--pytorch_backend {str(folder)!r} is not the PyTorch backend's folder "
                        f"(no models/registry.py); its models are what this backend exports")
    parent = str(folder.parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    return importlib.import_module(f"{folder.name}.models")


def export(opts: Options, path: Path) -> None:
    """Export the model of `opts` to `path`, atomically (see the module doc)."""
    torch = _import_torch()
    registry = model_registry(opts)
    try:
        spec = registry.get_model_spec(opts.model)
    except ValueError as error:  # the PyTorch backend's UnknownModelError lists the ids
        raise UserError(str(error)) from None
    dtype = {"float32": torch.float32, "float16": torch.float16,
             "bfloat16": torch.bfloat16}[opts.dtype]
    started = time.perf_counter()
    torch.manual_seed(opts.seed)
    model = spec.build().eval().to(dtype)
    example = torch.randn(opts.batch_size, *spec.input_shape).to(dtype)
    with torch.inference_mode(False), torch.no_grad():
        program = torch.onnx.export(model, (example,), dynamo=True, verbose=False)
    program.model.metadata_props.update({
        **expected_metadata(opts), "dlbs.title": spec.title, "dlbs.torch": torch.__version__})
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                                         dir=path.parent)
    os.close(handle)
    try:
        program.save(temporary)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    log(f"exported {opts.model} ({opts.dtype}, batch {opts.batch_size}, seed {opts.seed}) "
        f"to {path} in {time.perf_counter() - started:.1f} s (torch {torch.__version__})")
