"""How fast the shared store reads: `dlbs report`, `dlbs history --check`, `dlbs serve`.

    .venv/bin/python bench/store_speed.py --url postgresql://... [--experiments 100000]
        [--configs 1000] [--runs 50] [--folder /tmp/dlbs-store-speed] [--repeat 3]

1. report: the 100,000-experiment store of bench/report_speed.py (100 batch times each,
   built there or reused), copied into PostgreSQL with `dlbs results copy` (schema
   `bench_report`, reused when it holds them all); `dlbs report --type weak` and
   `--format csv` timed on both stores, a subprocess each, as a user waits.
2. history: 1,000 configurations x 50 tagged runs (one ok attempt each, 20 batch times),
   in SQLite and in PostgreSQL (schema `bench_history`); `dlbs history --check` timed on
   both (it exits 1: a few configurations are planted 20% slower in the newest run).
3. serve: `dlbs serve` on the PostgreSQL report store; the first report page (which reads
   the store), then the report page again (the store unchanged: cached columns), each
   request timed from the client (a weak report of 100,000 experiments has 25,000 rows:
   the page shows the first 1,000, the whole table is its CSV link).
Prints best wall time and CPU time (user + system of the subprocess) per command.
"""

from __future__ import annotations

import argparse
import http.client
import os
import platform
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import report_speed  # noqa: E402

from dlbs.results.store import Attempt, open_existing_store, open_store  # noqa: E402

DLBS = [sys.executable, "-m", "dlbs.cli.main"]
SLOWER = 1.2


def schema_url(url: str, schema: str, fresh: bool = False) -> str:
    """`url` with its tables in `schema` (created when missing; emptied when `fresh`)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if fresh:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def count(location: str) -> int:
    """Attempts in a store (0 when there is none)."""
    store = open_existing_store(location)
    if store is None:
        return 0
    with store:
        return int(store.change_marker()[0])


def history_attempts(configs: int, runs: int) -> list[Attempt]:
    """One ok attempt per configuration and tagged run; 1% planted slower in the newest."""
    rng = np.random.default_rng(7)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    found = []
    for config in range(configs):
        model, batch = f"model{config % 50:02d}", 2 ** (config // 50 % 8 + 3)
        level = 10.0 + config % 97
        for run in range(runs):
            factor = SLOWER if run == runs - 1 and config % 100 == 0 else 1.0
            times = rng.normal(level * factor, level * 0.01, 20).tolist()
            ended = start + timedelta(days=run, seconds=config)
            tag = f"nightly-{run:03d}"
            params = {"exp.model": model, "exp.replica_batch": batch, "trial": config // 400,
                      "exp.framework": "pytorch", "exp.device_type": "gpu", "exp.num_gpus": 1,
                      "runtime.run_tag": tag}
            found.append(Attempt(f"cfg{config:05d}", run + 1, "ok", None, params,
                                 {"results.time_data": times}, None, {"gpu_model": "H100"},
                                 None, (ended - timedelta(seconds=30)).isoformat(),
                                 ended.isoformat(), run_tag=tag, run_host="ci",
                                 run_folder="/ci/logs"))
    return found


def show(name: str, wall: float, cpu: float, repeat: int) -> None:
    """One result line."""
    print(f"{name:58s} wall {wall:6.2f} s, CPU {cpu:6.2f} s (best of {repeat}); load "
          f"{os.getloadavg()[0]:.2f}", flush=True)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve_timings(url: str, repeat: int) -> list[tuple[float, float]]:
    """The first report page and `repeat` more: (wall seconds, the server's CPU seconds).

    Wall time is a client's; CPU time the server process's (/proc).
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([*DLBS, "serve", url, "--port", str(port)], cwd=REPO,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"dlbs serve did not start: {server.stderr.read()}") \
                        from None
                time.sleep(0.2)
        found = []
        for _ in range(repeat + 1):
            cpu = _cpu_seconds(server.pid)
            began = time.perf_counter()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            connection.request("GET", "/report?type=weak")
            response = connection.getresponse()
            body = response.read()
            connection.close()
            if response.status != 200 or b"<table" not in body:
                raise SystemExit(f"report page: HTTP {response.status}")
            found.append((time.perf_counter() - began, _cpu_seconds(server.pid) - cpu))
        return found
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    """Build (or reuse) the stores, time the commands, print the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("DLBS_TEST_POSTGRES_URL"),
                        help="the PostgreSQL database (default: $DLBS_TEST_POSTGRES_URL)")
    parser.add_argument("--experiments", type=int, default=100_000)
    parser.add_argument("--configs", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--folder", default="/tmp/dlbs-store-speed")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parts", default="report,history,serve",
                        help="which measurements (comma-separated)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if not args.url:
        raise SystemExit("--url (or DLBS_TEST_POSTGRES_URL): run .ci/services/postgres.sh")
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    os.chdir(REPO)
    print(f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)

    # 1. report
    base = folder / "base.db"
    report_url = schema_url(args.url, "bench_report")
    if parts & {"report", "serve"}:
        report_speed.build(base, report_speed.experiments(args.experiments), 100, 1, set())
    if parts & {"report", "serve"} and count(report_url) != count(str(base)):
        began = time.perf_counter()
        subprocess.run([*DLBS, "results", "copy", str(base), report_url], check=True, cwd=REPO)
        print(f"copied {base} into PostgreSQL in {time.perf_counter() - began:.0f} s", flush=True)
    for name, location in (("SQLite", str(base)), ("PostgreSQL", report_url)):
        if "report" not in parts:
            break
        wall, _, cpu = report_speed.timed([*DLBS, "report", location, "--type", "weak", "-o",
                                           str(folder / "weak.txt")], args.repeat)
        show(f"report --type weak, {args.experiments} experiments, {name}", wall, cpu,
             args.repeat)
        wall, _, cpu = report_speed.timed([*DLBS, "report", location, "--format", "csv",
                                           "-o", str(folder / "regular.csv")], args.repeat)
        show(f"report --format csv, {args.experiments} experiments, {name}", wall, cpu,
             args.repeat)

    # 2. history
    history_db = folder / f"history-{args.configs}x{args.runs}.db"
    history_url = schema_url(args.url, "bench_history")
    wanted = args.configs * args.runs
    attempts = None
    for location in (str(history_db), history_url):
        if "history" in parts and count(location) != wanted:
            attempts = attempts or history_attempts(args.configs, args.runs)
            began = time.perf_counter()
            if location.startswith("postgresql"):
                schema_url(args.url, "bench_history", fresh=True)
            else:
                history_db.unlink(missing_ok=True)
            with open_store(location) as store:
                store.record_attempts(attempts)
            print(f"built the history store ({wanted} attempts) in "
                  f"{time.perf_counter() - began:.0f} s", flush=True)
    for name, location in (("SQLite", str(history_db)), ("PostgreSQL", history_url)):
        if "history" not in parts:
            break
        wall, _, cpu = report_speed.timed([*DLBS, "history", location, "--check", "-o",
                                           str(folder / "history.txt")], args.repeat, ok=(1,))
        show(f"history --check, {args.configs} configs x {args.runs} runs, {name}", wall,
             cpu, args.repeat)
        print((folder / "history.txt").read_text().count("regression"),
              "regression(s) flagged (planted: every 100th configuration)", flush=True)

    # 3. serve
    if "serve" not in parts:
        return
    seconds = serve_timings(report_url, args.repeat)
    later = seconds[1:]
    print(f"serve /report?type=weak over {args.experiments} experiments (PostgreSQL): first "
          f"page {seconds[0][0]:.2f} s wall, {seconds[0][1]:.2f} s server CPU (reads the "
          f"store); then wall {min(w for w, _ in later):.2f} s best / "
          f"{max(w for w, _ in later):.2f} s worst, server CPU "
          f"{min(c for _, c in later):.2f} s best of {args.repeat}; load "
          f"{os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
