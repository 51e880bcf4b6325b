"""An ONNX Runtime session for a model file, its synthetic inputs, and one inference step.

The session layer: it turns the options into `SessionOptions` and providers, checks that a
reused file holds what it should, makes the input batch once, and returns the step the
timing loop calls. Nothing here times anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnxruntime as ort

from .errors import UserError
from .models import ModelFile
from .options import OPTIMIZATION_LEVELS, PROVIDERS, Options

#: ONNX tensor types the synthetic inputs can be made of.
NUMPY_TYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_,
}
#: The ONNX type of a floating-point input for each --dtype.
FLOAT_TYPES = {"float32": "tensor(float)", "float16": "tensor(float16)"}


def session_options(opts: Options) -> ort.SessionOptions:
    """Graph optimisation level, threads, execution mode and spinning, as the flags say."""
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(
        ort.GraphOptimizationLevel, OPTIMIZATION_LEVELS[opts.graph_optimization_level])
    options.intra_op_num_threads = opts.intra_op_threads
    options.inter_op_num_threads = opts.inter_op_threads
    options.execution_mode = (ort.ExecutionMode.ORT_PARALLEL if opts.execution_mode == "parallel"
                              else ort.ExecutionMode.ORT_SEQUENTIAL)
    options.add_session_config_entry("session.intra_op.allow_spinning",
                                     "1" if opts.allow_spinning else "0")
    options.log_severity_level = 3  # errors only: warnings about unused initialisers are noise
    return options


def providers(opts: Options) -> list[str]:
    """The providers to ask for, best first; refuses one this onnxruntime build lacks.

    A GPU provider falls back to the CPU for the operators it has no kernel for (as ONNX
    Runtime users configure it); the session's own list says what it took.
    """
    wanted = PROVIDERS[opts.execution_provider]
    available = ort.get_available_providers()
    if wanted not in available:
        raise UserError(f"--execution_provider {opts.execution_provider}: this onnxruntime "
                        f"{ort.__version__} build has no {wanted}; it has "
                        f"{', '.join(available)} (install onnxruntime-gpu for cuda/tensorrt)")
    chain = [wanted]
    if opts.execution_provider == "tensorrt" and PROVIDERS["cuda"] in available:
        chain.append(PROVIDERS["cuda"])
    if wanted != PROVIDERS["cpu"]:
        chain.append(PROVIDERS["cpu"])
    return chain


def make_session(opts: Options, model: ModelFile) -> ort.InferenceSession:
    """The session of `model`; a file ONNX Runtime cannot load or run is a UserError."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    user_errors = tuple(getattr(state, name) for name in
                        ("InvalidGraph", "InvalidProtobuf", "NotImplemented", "NoSuchFile",
                         "InvalidArgument") if hasattr(state, name))
    try:
        session = ort.InferenceSession(str(model.path), session_options(opts),
                                       providers=providers(opts))
    except user_errors as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UserError(f"ONNX Runtime cannot run {model.path} ({opts.dtype}, "
                        f"{opts.execution_provider}): {first}") from None
    held = session.get_modelmeta().custom_metadata_map
    wrong = {key: held.get(key) for key, value in model.expected.items() if held.get(key) != value}
    if wrong:
        raise UserError(f"{model.path} is not the export it is named after (it holds "
                        f"{wrong}, expected {model.expected}); delete it to export it again")
    return session


def synthetic_feeds(session: ort.InferenceSession, opts: Options) -> dict[str, np.ndarray]:
    """One random batch for every input, made once (normal noise; small integers)."""
    rng = np.random.default_rng(opts.seed)
    feeds = {}
    for node in session.get_inputs():
        numpy_type = NUMPY_TYPES.get(node.type)
        if numpy_type is None:
            raise UserError(f"input {node.name!r} has type {node.type}, for which this backend "
                            f"cannot make synthetic data ({', '.join(NUMPY_TYPES)})")
        if np.issubdtype(numpy_type, np.floating) and node.type != FLOAT_TYPES[opts.dtype]:
            raise UserError(f"input {node.name!r} is {node.type}, but --dtype is {opts.dtype} "
                            f"({FLOAT_TYPES[opts.dtype]})")
        shape = input_shape(node.name, list(node.shape), opts.batch_size)
        if np.issubdtype(numpy_type, np.floating):
            feeds[node.name] = rng.standard_normal(shape, dtype=np.float32).astype(numpy_type)
        else:
            feeds[node.name] = rng.integers(0, 2, size=shape).astype(numpy_type)
    return feeds


def input_shape(name: str, dims: list[Any], batch_size: int) -> list[int]:
    """The input's shape for this batch: the first dimension is the batch, the rest fixed."""
    if not dims:
        return []
    first, rest = dims[0], dims[1:]
    if isinstance(first, int) and first != batch_size:
        raise UserError(f"input {name!r} has a fixed batch of {first}; run it with "
                        f"--batch_size {first} (or export it with a dynamic batch)")
    for dim in rest:
        if not isinstance(dim, int) or dim < 1:
            raise UserError(f"input {name!r} has a dimension {dim!r} that is not fixed "
                            f"(shape {dims}); only the batch may be dynamic")
    return [batch_size, *rest]


def make_step(session: ort.InferenceSession, feeds: dict[str, np.ndarray],
              opts: Options) -> Callable[[], None]:
    """One inference of the fixed batch, returning once its outputs are complete.

    On the CPU `run` takes the numpy inputs as they are. On a GPU the input is copied to the
    device once and the outputs stay there (I/O binding), as with the PyTorch backend's
    synthetic data; `synchronize_outputs` waits for the device before the step returns.
    """
    names = [node.name for node in session.get_outputs()]
    if opts.device == "cpu":
        return lambda: session.run(names, feeds)
    binding = session.io_binding()
    for name, array in feeds.items():
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(array, "cuda", 0))
    for name in names:
        binding.bind_output(name, "cuda", 0)

    def step() -> None:
        session.run_with_iobinding(binding)
        binding.synchronize_outputs()

    return step


def outputs(session: ort.InferenceSession, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of one inference, as numpy arrays (for checks of what is computed)."""
    return session.run(None, feeds)
