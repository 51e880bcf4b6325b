"""Check the monitor against a real GPU and a real nvidia-smi (not part of the test suite).

Run on a machine with an NVIDIA GPU and PyTorch: `python3 tests/monitor/gpu_check.py OUTDIR`.
It captures nvidia-smi's answer to the monitor's query when idle and under load (the canned
files in data/ are such captures), times one query and one /proc scan, and monitors a
PyTorch process that multiplies matrices on GPU 0 while holding 8 GiB (with every GPU
selected, so a mean and sums over several GPUs show), writing the series to
OUTDIR/series.json. The CI machine has no GPU; the suite uses a fake nvidia-smi instead.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dlbs.monitor import ResourceMonitor, proc  # noqa: E402
from dlbs.monitor.gpu import QUERY_ARGS  # noqa: E402

LOAD = """
import time, torch
hold = torch.empty(8 * 2**30, dtype=torch.uint8, device="cuda")
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.monotonic() + 6
while time.monotonic() < end:
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
print("load done", flush=True)
"""


def query() -> str:
    """One answer of nvidia-smi to the monitor's query."""
    return subprocess.run(["nvidia-smi", *QUERY_ARGS], capture_output=True, text=True,
                          check=True).stdout


def main(out: Path) -> None:
    """Capture, time and monitor; print a summary."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "idle.csv").write_text(query())
    start = time.perf_counter()
    for _ in range(10):
        query()
    print(f"nvidia-smi query: {(time.perf_counter() - start) * 100:.1f} ms per call")
    start = time.perf_counter()
    for _ in range(20):
        count = len(proc.scan_processes())
    print(f"/proc scan: {(time.perf_counter() - start) * 50:.2f} ms for {count} processes")
    load = subprocess.Popen([sys.executable, "-c", LOAD])
    gpus = [line.split(",")[0].strip() for line in (out / "idle.csv").read_text().splitlines()]
    monitor = ResourceMonitor(0.25, gpus=gpus)  # all GPUs: the load is on GPU 0 only
    monitor.start(load.pid)
    time.sleep(4)
    (out / "busy.csv").write_text(query())
    load.wait()
    series = monitor.stop()
    (out / "series.json").write_text(json.dumps({"series": series,
                                                 "warnings": monitor.warnings}, indent=1))
    for name, values in series.items():
        print(name, len(values), "max", max(values) if values else None)
    print("warnings", monitor.warnings)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
