"""Whether a slow page of `dlbs serve` makes a quick one wait, and what a burst costs.

    .venv/bin/python bench/serve_load.py [--store PATH_OR_URL] [--experiments 100000]
        [--folder /tmp/dlbs-report-speed] [--burst 6] [--repeat 3]

The store: `--store`, else the 100,000-experiment store of bench/report_speed.py
(`FOLDER/base.db`, built there or reused). `dlbs serve` runs as a subprocess on a free
localhost port (from this checkout, or from `--source DIR`, another checkout, to measure
an older version the same way). Then, each request timed from its client:
  1. the Runs page (quick) and the History page, the first of which reads the store;
  2. two bursts of `--burst` History pages at once, while a client asks for the Runs page
     every 0.2 s: each with another `?z=` (no kept page serves them), then each with another
     `?metric=` (a history of every experiment built for each); how long each History page
     took, its size and status (503: "busy", answered at once), and the slowest Runs page
     during the burst;
  3. the server's resident memory (VmRSS) before and after, and its peak (VmHWM).
Prints the numbers with the load average beside them (a 2-core machine shared with others:
compare within one run).
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def get(port: int, path: str, timeout: float = 600) -> tuple[int, int, float]:
    """(status, bytes, seconds) of one GET."""
    began = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        return response.status, len(body), time.perf_counter() - began
    finally:
        connection.close()


def memory(pid: int) -> dict[str, float]:
    """The process's VmRSS and VmHWM in MiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return found


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def burst(port: int, name: str, paths: list[str]) -> None:
    """The pages at once, while a client asks for the Runs page every 0.2 s."""
    done = threading.Event()
    quick_times: list[float] = []

    def poll() -> None:
        while not done.is_set():
            quick_times.append(get(port, "/")[2])
            time.sleep(0.2)

    poller = threading.Thread(target=poll)
    poller.start()
    began = time.perf_counter()
    with ThreadPoolExecutor(len(paths)) as pool:
        answered = list(pool.map(lambda path: get(port, path), paths))
    total = time.perf_counter() - began
    done.set()
    poller.join()
    for index, (status, size, seconds) in enumerate(answered):
        print(f"  {name} page {index + 1}: status {status}, {seconds:.2f} s, "
              f"{size / 1e6:.3f} MB")
    print(f"burst of {len(paths)} History pages ({name}): {total:.2f} s in all; Runs page "
          f"during it: slowest {max(quick_times):.3f} s, median "
          f"{sorted(quick_times)[len(quick_times) // 2]:.3f} s ({len(quick_times)} asked); "
          f"{load()}")


def main() -> None:
    """Serve the store, time the pages, print the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store")
    parser.add_argument("--experiments", type=int, default=100_000)
    parser.add_argument("--folder", default="/tmp/dlbs-report-speed")
    parser.add_argument("--burst", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--source", help="serve from this checkout instead (an older version)")
    args = parser.parse_args()
    store = args.store
    if store is None:
        import report_speed

        folder = Path(args.folder)
        folder.mkdir(parents=True, exist_ok=True)
        store = str(folder / "base.db")
        report_speed.build(Path(store), report_speed.experiments(args.experiments), 100, 1,
                           set())
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    source = Path(args.source).resolve() if args.source else REPO
    environment = {**os.environ, "PYTHONPATH": str(source)}
    server = subprocess.Popen([sys.executable, "-m", "dlbs.cli.main", "serve", store,
                               "--port", str(port)], cwd=source, env=environment,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                get(port, "/", 5)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("dlbs serve did not start") from None
                time.sleep(0.2)
        print(f"serving {store} from {source}; {os.cpu_count()} CPUs; {load()}")
        before = memory(server.pid)
        quick = min(get(port, "/")[2] for _ in range(args.repeat))
        print(f"Runs page alone: {quick:.3f} s (best of {args.repeat})")
        status, size, seconds = get(port, "/history")
        print(f"History page, first (reads the store): {seconds:.2f} s, {size / 1e6:.2f} MB, "
              f"status {status}; {load()}")
        status, size, seconds = get(port, "/history?z=2.9")
        print(f"History page, other z (store read): {seconds:.2f} s, {size / 1e6:.2f} MB, "
              f"status {status}; {load()}")
        burst(port, "z", [f"/history?z={2 + index / 10:.1f}" for index in range(args.burst)])
        # Each its own history over every experiment: a metric nothing kept holds.
        metrics = ["time", "time_p90", "time_p95", "time_p99", "throughput", "time_min",
                   "time_max", "time_std"]
        burst(port, "metric", [f"/history?metric={metrics[index % len(metrics)]}"
                               for index in range(args.burst)])
        after = memory(server.pid)
        print(f"server memory: {before['VmRSS']:.0f} MiB before, {after['VmRSS']:.0f} MiB "
              f"after, peak {after['VmHWM']:.0f} MiB")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
