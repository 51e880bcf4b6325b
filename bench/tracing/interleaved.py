"""Trace overhead on a busy machine: untraced and traced steps interleaved in one process.

overhead.py compares a run's timed loop with its traced pass, one after the other; on a
machine that others load, the load changes between the two and hides a small overhead.
Here the PyTorch backend's own pieces (its training step, its Tracer) alternate in one
process: `--rounds` times, `--steps` untimed-by-the-tracer steps (timed here with
perf_counter, as the timed loop does), then `--steps` traced steps (the trace's step spans),
for every level. The fastest step of each kind over all rounds is the figure compared.

    python bench/tracing/interleaved.py --model resnet18 --batch 4 --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "python")]

import torch  # noqa: E402
import torchvision  # noqa: E402
from pytorch_benchmarks.steps import make_optimizer, make_training_step  # noqa: E402
from pytorch_benchmarks.trace_flags import TraceOptions  # noqa: E402
from pytorch_benchmarks.tracing import Tracer  # noqa: E402

from dlbs.traces.reader import TraceFile  # noqa: E402
from dlbs.traces.views import view  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--levels", default="step,layer,operator,full")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    model = getattr(torchvision.models, args.model)(weights=None).train()
    optimizer = make_optimizer(model, 0.01, device)
    inputs = torch.randn(args.batch, 3, 224, 224)
    labels = torch.randint(0, 1000, (args.batch,))
    step = make_training_step(model, optimizer, device, torch.float32)
    for _ in range(2):
        step(inputs, labels)
    folder = Path(tempfile.mkdtemp(prefix="dlbs-interleaved-"))
    results = {}
    for level in args.levels.split(","):
        plain, traced = [], []
        for round_index in range(args.rounds):
            for _ in range(args.steps):
                start = time.perf_counter()
                step(inputs, labels)
                plain.append((time.perf_counter() - start) * 1000.0)
            path = folder / f"{level}-{round_index}.trace.json.gz"
            tracer = Tracer(TraceOptions(level, args.steps, str(path)), device, True,
                            {"model": args.model})
            tracer.attach(model, make_training_step(model, optimizer, device, torch.float32,
                                                    tracer.phase))
            keys = tracer.run(lambda: (inputs, labels), step)
            traced += [row["step_ms"] for row in
                       view("duration", TraceFile(keys["results.trace_file"])).rows]
        results[level] = (plain, traced)
        print(f"{level:<9} untraced fastest {min(plain):8.1f} ms median "
              f"{statistics.median(plain):8.1f} | traced fastest {min(traced):8.1f} ms median "
              f"{statistics.median(traced):8.1f} | overhead (fastest) "
              f"{(min(traced) / min(plain) - 1) * 100:+6.1f}%  (medians "
              f"{(statistics.median(traced) / statistics.median(plain) - 1) * 100:+6.1f}%)",
              flush=True)


if __name__ == "__main__":
    main()
