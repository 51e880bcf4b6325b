"""Build the run from the options (model file, session, inputs, step), time it, report it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnxruntime as ort
from benchmark_common.memory import peak_rss_mib
from benchmark_common.protocol import emit, time_statistics
from benchmark_common.timed_marks import TimedMarks

from .export import FLOPS_METADATA, log
from .models import resolve_model
from .options import Options
from .session import make_session, make_step, synthetic_feeds
from .timing import run_timed_loop


def run_benchmark(opts: Options, argv: Sequence[str]) -> dict[str, Any]:
    """Run the experiment (`argv`: its command line); return the protocol's results."""
    model = resolve_model(opts, argv)
    session = make_session(opts, model)
    metadata = session.get_modelmeta().custom_metadata_map
    feeds = synthetic_feeds(session, opts)
    step = make_step(session, feeds, opts)
    shapes = " ".join(f"{name}={list(array.shape)}:{array.dtype}" for name, array in feeds.items())
    log(f"model={opts.model} file={model.path} ({model.origin}) inputs={shapes} "
        f"graph_optimization_level={opts.graph_optimization_level} "
        f"providers={','.join(session.get_providers())} "
        f"intra_op_threads={opts.intra_op_threads} inter_op_threads={opts.inter_op_threads} "
        f"execution_mode={opts.execution_mode} allow_spinning={opts.allow_spinning} "
        f"onnxruntime={ort.__version__} exported_by_torch={metadata.get('dlbs.torch', '-')}")
    timings = run_timed_loop(step, opts.num_warmup_batches, opts.num_batches,
                             TimedMarks(emit))
    results: dict[str, Any] = time_statistics(timings.batch_ms)
    results["results.throughput"] = opts.batch_size * 1000.0 / results["results.time"]
    results["results.time_data"] = timings.batch_ms
    results["results.warmup_time_data"] = timings.warmup_ms
    if opts.device == "cpu":
        # ONNX Runtime has no peak counter for device memory: on a GPU nothing is printed.
        results["results.mem_peak"] = peak_rss_mib()
    results.update(flops_results(metadata))
    results["exp.model_title"] = metadata.get("dlbs.title") or opts.model
    results["exp.framework_ver"] = ort.__version__
    return results


def flops_results(metadata: dict[str, str]) -> dict[str, Any]:
    """FLOPs per sample from the model file's metadata (the exporter counted them), or why not.

    The session runs the PyTorch backend's model definition exported as it is, so its FLOPs
    are the PyTorch backend's forward count (docs/efficiency.md).
    """
    try:
        return {"results.flops_per_sample": float(metadata[FLOPS_METADATA])}
    except (KeyError, ValueError):
        return {"results.flops_unavailable":
                f"the model file has no {FLOPS_METADATA} (dlbs writes it when it exports one "
                "of the PyTorch backend's models; a file of your own, or one an older dlbs "
                "exported, has none)"}
