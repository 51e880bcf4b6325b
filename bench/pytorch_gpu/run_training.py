"""ResNet-50 training on one GPU: defaults, each speed knob, real JPEG data, plain loops.

The backend's defaults, each speed knob and real JPEG data, beside plain PyTorch loops with
the same knobs, in one call.

Usage (repository root, on a GPU machine)::

    python bench/pytorch_gpu/run_training.py --plan knobs --out OUT [--data DIR]

Every row runs in its own process, in the order of its plan, until ``--deadline_s`` (a row
is started only with at least ``--min_row_s`` left). Batch 256, float16 (AMP + GradScaler)
unless a row says otherwise. ``defaults`` passes nothing but model, device, dtype, batch and
iteration counts. The JPEG rows read a folder written by
``python/pytorch_benchmarks/make_jpeg_dataset.py`` (made first if ``--data`` does not hold
one). Every process's output is appended to ``<out>/<plan>.log``, the figures to
``<out>/<plan>.json``; a Markdown table is printed at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from run_settings import BACKEND, REFERENCE, ROOT, keep, run

GENERATOR = ROOT / "python" / "pytorch_benchmarks" / "make_jpeg_dataset.py"
WARMUP, STEPS = 10, 50
GRAPHS = ["--compile", "true", "--cuda_graphs", "true"]
# max-autotune without inductor's CUDA graphs (the backend captures the step itself), its
# search for convolutions left to cuDNN: the Triton convolution templates cost minutes of
# compilation and rarely beat cuDNN on this model.
AUTOTUNE = ["--compile_mode", "max-autotune-no-cudagraphs", "--inductor_options",
            "max_autotune_conv_backends=ATEN"]


def backend(*flags: str, dtype: str = "float16") -> list[str]:
    """The backend: model, device, dtype, batch and iterations, then ``flags``."""
    return [sys.executable, str(BACKEND), "--model", "resnet50", "--device", "gpu",
            "--dtype", dtype, "--batch_size", "256", "--num_warmup_batches", str(WARMUP),
            "--num_batches", str(STEPS), *flags]


def reference(*flags: str) -> list[str]:
    """The plain loop (reference_loop.py), training, float16, channels-last."""
    return [sys.executable, str(REFERENCE), "--phase", "train", "--batch_size", "256",
            "--dtype", "float16", "--channels_last", "--warmup", str(WARMUP),
            "--steps", str(STEPS), *flags]


def jpeg(data: str, decode: str, *flags: str) -> list[str]:
    """The backend on the JPEG folder, shuffled, decoding on ``decode``."""
    workers = str(os.cpu_count() or 1)
    return backend(*flags, "--data_dir", data, "--data_backend", "image_folder",
                   "--data_shuffle", "true", "--decode", decode, "--num_loader_threads", workers)


def plans(data: str) -> dict[str, list[tuple[str, list[str]]]]:
    """Rows of each plan, most important first."""
    return {
        "knobs": [
            ("defaults", backend()),
            ("eager, NCHW (channels_last false)", backend("--channels_last", "false")),
            ("eager, foreach SGD", backend("--optimizer_impl", "foreach")),
            ("eager, CUDA graph of the step", backend("--cuda_graphs", "true")),
            ("reference: plain loop, eager CL", reference()),
            ("compiled", backend("--compile", "true")),
            ("compiled, CUDA graph of the step", backend(*GRAPHS)),
            ("reference: compiled, fused SGD, CUDA graph", reference(
                "--compile", "--fused", "--graph")),
            ("jpeg gpu decode: compiled, CUDA graph", jpeg(data, "gpu", *GRAPHS)),
            ("jpeg cpu decode: compiled, CUDA graph", jpeg(data, "cpu", *GRAPHS)),
            ("compiled, CUDA graph, LARS", backend(*GRAPHS, "--optimizer", "lars")),
            ("eager, timing events", backend("--timing", "events")),
            ("compiled, CUDA graph, bf16", backend(*GRAPHS, dtype="bfloat16")),
        ],
        "jpeg": [
            ("jpeg gpu decode: compiled, CUDA graph", jpeg(data, "gpu", *GRAPHS)),
            ("compiled, CUDA graph of the step", backend(*GRAPHS)),
            ("jpeg cpu decode: compiled, CUDA graph", jpeg(data, "cpu", *GRAPHS)),
        ],
        "autotune": [
            ("compiled max-autotune, CUDA graph of the step", backend(*GRAPHS, *AUTOTUNE)),
            ("reference: compiled max-autotune, fused SGD, CUDA graph", reference(
                "--compile", "--compile_mode", "max-autotune-no-cudagraphs", "--fused",
                "--graph", "--inductor", "max_autotune_conv_backends=ATEN")),
            ("jpeg gpu decode: compiled max-autotune, CUDA graph", jpeg(
                data, "gpu", *GRAPHS, *AUTOTUNE)),
            ("defaults", backend()),
        ],
    }


def make_data(data: Path, log) -> None:
    """The JPEG folder: 100 classes x 128 images (12,800 files, about 1.2 GB)."""
    if data.is_dir() and any(data.iterdir()):
        return
    started = time.time()
    proc = subprocess.run([sys.executable, str(GENERATOR), "--output", str(data), "--classes",
                           "100", "--images_per_class", "128"], capture_output=True, text=True)
    log.write(f"\n===== make_jpeg_dataset ({time.time() - started:.1f}s)\n"
              f"{proc.stdout}{proc.stderr}")
    log.flush()
    print(proc.stdout.strip() or proc.stderr.strip(), flush=True)


def main() -> None:
    """Run one plan, print its table."""
    p = argparse.ArgumentParser()
    p.add_argument("--plan", default="knobs", choices=["knobs", "jpeg", "autotune"])
    p.add_argument("--only", default="", help="rows whose name contains this")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--data", default="/tmp/dlbs_jpeg_train")
    p.add_argument("--deadline_s", type=float, default=540.0)
    p.add_argument("--min_row_s", type=float, default=45.0)
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    rows = []
    with open(out / f"{a.plan}.log", "a") as log:
        for name, argv in plans(a.data)[a.plan]:
            if a.only not in name:
                continue
            left = a.deadline_s - (time.time() - started)
            if left < a.min_row_s:
                rows.append({"row": name, "skipped": "deadline"})
                continue
            if "--data_dir" in argv:
                make_data(Path(a.data), log)
                left = a.deadline_s - (time.time() - started)
            t0 = time.time()
            values = run(argv, log, left)
            row = {
                "row": name,
                "img_s": values.get("results.throughput", values.get("ref.throughput")),
                "median_ms": values.get("results.time_median"),
                "data_wait": values.get("results.data_wait"),
                "mem_mib": values.get("results.mem_peak", values.get("ref.mem_peak")),
                "status": values.get("results.status"),
                "msg": values.get("results.status_msg"),
                "wall_s": round(time.time() - t0, 1),
            }
            keep(rows, row, out / f"{a.plan}.json")
    print("\n| row | img/s | data wait | wall s |")
    print("|---|---|---|---|")
    for row in rows:
        thr = row.get("img_s")
        shown = f"{thr:,.0f}" if isinstance(thr, float) else (
            row.get("skipped") or row.get("msg") or "failed")
        wait = row.get("data_wait")
        print(f"| {row['row']} | {shown} | {'' if wait is None else f'{wait:.3f}'} | "
              f"{row.get('wall_s', '')} |")


if __name__ == "__main__":
    main()
