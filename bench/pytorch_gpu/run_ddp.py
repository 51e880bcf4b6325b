"""DDP weak scaling of ResNet-50 (256 per GPU): the backend beside a plain-DDP reference.

Usage (repository root, on a machine with >= 2 GPUs)::

    python bench/pytorch_gpu/run_ddp.py --out results_dir [--gpus 2]

Runs, in order of importance and until ``--deadline_s``: 1-GPU and N-GPU eager runs of the
backend and of the references (``reference_loop.py`` for one GPU, ``ddp_reference.py`` under
torchrun for N), then backend DDP variants, then compiled runs. Output goes to
``<out>/ddp.log`` and ``<out>/ddp.json``; a table is printed at the end.

``--best_compiled`` runs the fastest one-GPU training configuration instead (compiled, the
whole step in one CUDA graph, fused SGD, channels-last, AMP float16), on 1 and N GPUs, beside
the same without the CUDA graph, plain compiled DDP, and the eager defaults::

    python run_ddp.py --gpus 4 --best_compiled --out OUT
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from run_settings import BACKEND, REFERENCE, run

HERE = Path(__file__).resolve().parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]


def backend(gpus: int, *extra: str, steps: int = 60) -> list[str]:
    """The backend's command line (under torchrun for several GPUs)."""
    flags = [
        str(BACKEND),
        "--model",
        "resnet50",
        "--device",
        "gpu",
        "--batch_size",
        "256",
        "--dtype",
        "float16",
        "--channels_last",
        "true",
        "--num_warmup_batches",
        "15",
        "--num_batches",
        str(steps),
        "--num_gpus",
        str(gpus),
        *extra,
    ]
    if gpus == 1:
        return [sys.executable, *flags]
    return [*TORCHRUN, f"--nproc_per_node={gpus}", *flags]


def reference(gpus: int, compiled: bool) -> list[str]:
    """Plain loop on one GPU, plain DDP on several."""
    extra = ["--compile"] if compiled else []
    if gpus == 1:
        return [
            sys.executable,
            str(REFERENCE),
            "--phase",
            "train",
            "--batch_size",
            "256",
            "--dtype",
            "float16",
            "--channels_last",
            "--warmup",
            "15",
            "--steps",
            "60",
            *extra,
        ]
    return [*TORCHRUN, f"--nproc_per_node={gpus}", str(HERE / "ddp_reference.py"), *extra]


def main() -> None:
    """Run the plan, print the table."""
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--deadline_s", type=float, default=560.0)
    p.add_argument("--skip_compiled", action="store_true")
    p.add_argument("--compiled_ddp_only", action="store_true", help="the compiled DDP variants")
    p.add_argument("--best_compiled", action="store_true",
                   help="compiled + CUDA graph of the step, beside plain compiled DDP")
    a = p.parse_args()
    n = a.gpus
    plan = [
        ("eager backend 1 GPU", backend(1)),
        (f"eager backend {n} GPUs", backend(n)),
        ("eager reference 1 GPU", reference(1, False)),
        (f"eager reference DDP {n} GPUs", reference(n, False)),
        (f"eager backend {n} GPUs, fp16 comm hook", backend(n, "--ddp_comm_hook", "fp16")),
        (f"eager backend {n} GPUs, bucket 100 MB", backend(n, "--ddp_bucket_cap_mb", "100")),
        (f"eager backend {n} GPUs, static graph", backend(n, "--ddp_static_graph", "true")),
        (
            f"eager backend {n} GPUs, broadcast buffers",
            backend(n, "--ddp_broadcast_buffers", "true"),
        ),
    ]
    if not a.skip_compiled:
        plan += [
            ("compiled backend 1 GPU", backend(1, "--compile", "true")),
            (f"compiled backend {n} GPUs", backend(n, "--compile", "true")),
            ("compiled reference 1 GPU", reference(1, True)),
            (f"compiled reference DDP {n} GPUs", reference(n, True)),
        ]
    if a.compiled_ddp_only:
        plan = [
            ("compiled backend 1 GPU", backend(1, "--compile", "true")),
            (f"compiled backend {n} GPUs", backend(n, "--compile", "true")),
            (
                f"compiled backend {n} GPUs, whole graph",
                backend(n, "--compile", "true", "--compile_ddp", "whole_graph"),
            ),
            (
                f"compiled backend {n} GPUs, bucket 100 MB",
                backend(n, "--compile", "true", "--ddp_bucket_cap_mb", "100"),
            ),
            ("eager backend 1 GPU", backend(1)),
            (f"eager backend {n} GPUs", backend(n)),
        ]
    if a.best_compiled:
        graphs = ("--compile", "true", "--cuda_graphs", "true")
        plan = [
            ("compiled backend 1 GPU", backend(1, *graphs)),
            (f"compiled backend {n} GPUs", backend(n, *graphs)),
            ("compiled reference 1 GPU", reference(1, True)),
            (f"compiled reference DDP {n} GPUs", reference(n, True)),
            ("compiled-without-graph backend 1 GPU", backend(1, "--compile", "true")),
            (f"compiled-without-graph backend {n} GPUs", backend(n, "--compile", "true")),
            ("eager backend 1 GPU", backend(1)),
            (f"eager backend {n} GPUs", backend(n)),
        ]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    rows = []
    with open(out / "ddp.log", "a") as log:
        for name, argv in plan:
            left = a.deadline_s - (time.time() - started)
            if left < 40:
                rows.append({"run": name, "skipped": "deadline"})
                continue
            values = run(argv, log, left)
            thr = values.get("results.throughput", values.get("ref.throughput"))
            rows.append(
                {
                    "run": name,
                    "img_s": thr,
                    "status": values.get("results.status"),
                    "msg": values.get("results.status_msg"),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            (out / "ddp.json").write_text(json.dumps(rows, indent=1))
    by_name = {r["run"]: r.get("img_s") for r in rows}
    print("\n| run | img/s | weak-scaling efficiency |")
    print("|---|---|---|")
    for r in rows:
        thr = r.get("img_s")
        eff = ""
        for mode in ("eager", "compiled-without-graph", "compiled"):
            kind = "reference" if "reference" in r["run"] else "backend"
            one = by_name.get(f"{mode} {kind} 1 GPU")
            if r["run"].startswith(f"{mode} ") and "1 GPU" not in r["run"] and thr and one:
                eff = f"{thr / (n * one):.3f}"
        shown = f"{thr:,.0f}" if isinstance(thr, float) else r.get("skipped", r.get("msg"))
        print(f"| {r['run']} | {shown} | {eff} |")


if __name__ == "__main__":
    main()
