"""The PyTorch backend's models, exported to ONNX into a cache (torch, onnx, onnxscript).

One file per model, dtype, batch and weights (the seed of the random initialisation):
`<cache_dir>/<model>-<dtype>-b<batch>-seed<seed>.onnx` (`<model>-c<classes>-...` with
`--num_classes`). The batch is fixed in the graph, as
inference engines prefer. A file is written under a temporary name in the cache folder and
renamed into place (an atomic rename on POSIX), so two runs exporting the same model at once
never see half a file: each renames a complete one. The file's metadata names what it holds
(`dlbs.model`, `dlbs.dtype`, `dlbs.batch`, `dlbs.seed`, `dlbs.title`, `dlbs.torch`, and
`dlbs.num_classes` with `--num_classes`), which the session checks when it reuses it, and the
model's forward FLOPs per sample as the PyTorch backend counts them (`dlbs.flops_per_sample`,
docs/efficiency.md).

torch is imported only here, in a child process (`python export.py <the backend's flags>`)
and only when a model has to be exported: the process that times the session never imports
torch (its threads, its memory), and a cached file or a user's `--model_file` runs without it.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script (the child process): make the package importable.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from onnxruntime_benchmarks.errors import UserError  # noqa: E402
from onnxruntime_benchmarks.options import FlagError, Options, parse_options  # noqa: E402

ERROR_PREFIX = "export.py: error: "

_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
#: The folder name of the PyTorch backend, looked for beside this backend's folder.
PYTORCH_BACKEND = "pytorch_benchmarks"
#: The model file's metadata entry with its forward FLOPs per sample.
FLOPS_METADATA = "dlbs.flops_per_sample"


def log(message: str) -> None:
    """An informational line (not a protocol key)."""
    print(f"[onnxruntime_benchmarks] {message}", flush=True)


def expected_metadata(opts: Options) -> dict[str, str]:
    """What a cached file of these options must say it holds."""
    expected = {"dlbs.model": opts.model, "dlbs.dtype": opts.dtype,
                "dlbs.batch": str(opts.batch_size), "dlbs.seed": str(opts.seed)}
    if opts.num_classes:
        expected["dlbs.num_classes"] = str(opts.num_classes)
    return expected


def cache_path(opts: Options) -> Path:
    """The cache file of the model, dtype, batch and seed of `opts`."""
    if not _SAFE_ID.fullmatch(opts.model):
        raise UserError(f"--model {opts.model!r}: not a model id (letters, digits, _ . -)")
    classes = f"-c{opts.num_classes}" if opts.num_classes else ""
    name = f"{opts.model}{classes}-{opts.dtype}-b{opts.batch_size}-seed{opts.seed}.onnx"
    return Path(opts.cache_dir) / name


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
        spec = registry.get_model_spec(opts.model, opts.num_classes)
    except ValueError as error:  # the PyTorch backend's UnknownModelError lists the ids
        raise UserError(str(error)) from None
    if getattr(spec, "sequence", None) is not None:
        raise UserError(f"{opts.model} is a transformer over token ids, which this backend "
                        "does not export (the PyTorch backend trains and runs it)")
    dtype = {"float32": torch.float32, "float16": torch.float16,
             "bfloat16": torch.bfloat16}[opts.dtype]
    started = time.perf_counter()
    torch.manual_seed(opts.seed)
    model = spec.build().eval().to(dtype)
    example = torch.randn(opts.batch_size, *spec.input_shape).to(dtype)
    with torch.inference_mode(False), torch.no_grad():
        program = torch.onnx.export(model, (example,), dynamo=True, verbose=False)
    program.model.metadata_props.update({
        **expected_metadata(opts), "dlbs.title": spec.title, "dlbs.torch": torch.__version__,
        **_flops_metadata(registry, spec)})
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


def _flops_metadata(registry, spec) -> dict[str, str]:
    """The forward FLOPs per sample of the exported model, counted by the PyTorch backend."""
    try:
        flops = importlib.import_module(registry.__name__.rsplit(".", 1)[0] + ".flops")
        forward, _ = flops.count_flops_per_sample(spec.build, spec.input_shape, training=False)
    except Exception as error:  # noqa: BLE001 - the export goes on; the run says why
        log(f"the FLOPs of {spec.model_id} could not be counted: {error}")
        return {}
    return {FLOPS_METADATA: repr(float(forward))}


def export_in_child(opts: Options, argv: Sequence[str]) -> None:
    """Export in a child process given the backend's own flags `argv`; see the module doc.

    The child's output goes to this process's stdout and stderr (the experiment's log); a
    user error there (exit status 2) is one here, with the child's message.
    """
    child = subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv],
                           stderr=subprocess.PIPE, text=True, errors="replace")
    sys.stderr.write(child.stderr)
    sys.stderr.flush()
    lines = [line for line in child.stderr.splitlines() if line.strip()]
    if child.returncode == UserError.exit_status:
        reasons = [line for line in lines if line.startswith(ERROR_PREFIX)]
        raise UserError(reasons[-1][len(ERROR_PREFIX):] if reasons else
                        f"exporting {opts.model} failed")
    if child.returncode != 0:
        raise RuntimeError(f"exporting {opts.model} to ONNX failed (exit status "
                           f"{child.returncode}): {lines[-1] if lines else 'no output'}")


def main(argv: Sequence[str] | None = None) -> int:
    """The child: export the model the backend's flags name into the cache."""
    try:
        opts = parse_options(argv)
        export(opts, cache_path(opts))
    except (UserError, FlagError) as error:
        print(f"{ERROR_PREFIX}{' '.join(str(error).split())}", file=sys.stderr, flush=True)
        return UserError.exit_status
    return 0


if __name__ == "__main__":
    sys.exit(main())
