"""Many writers into one PostgreSQL store at once: nothing lost, nothing twice, kill -9 safe.

    .venv/bin/python bench/store_writers.py --url postgresql://... [--writers 8]
        [--experiments 500]

Each writer is a process that records `--experiments` experiments the way `dlbs run` does
(`record_start`, then `record_end` with 100 batch times and the monitor's summaries), every
fifth one an experiment all writers share (runs that start one experiment at once), and
prints each attempt once its end is committed. Two rounds, each into a fresh schema:
1. all writers run to the end: the store must hold writers x experiments attempts, each
   printed one exactly once, each shared experiment numbered 1..writers;
2. one writer is killed with SIGKILL midway: every attempt it printed must be there, ended
   as printed; the others still finish.
Prints the wall time and the attempts per second of round 1.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dlbs.results.store import open_store  # noqa: E402

WRITER = textwrap.dedent("""
    import os, sys
    import numpy as np
    from dlbs.results.store import open_store

    name, count = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    params = {"exp.framework": "pytorch", "exp.model": "resnet50", "exp.device_type": "gpu",
              "exp.num_gpus": 1, "exp.dtype": "float16", "exp.phase": "training"}
    with open_store(os.environ["DLBS_BENCH_STORE"]) as store:
        for index in range(count):
            exp_id = f"{name}-{index}" if index % 5 else f"shared-{index}"
            number = store.record_start(exp_id, None, {**params, "exp.replica_batch": index},
                                        log_path=f"logs/{exp_id}.log",
                                        environment={"host": name},
                                        run=("bench", name, "/bench/" + name))
            store.record_end(exp_id, number, "ok", results={
                "results.time_data": rng.normal(20.0, 0.2, 100).tolist(),
                "results.use.gpu_util_mean": 97.5, "results.use.rss_max": 2048.0})
            print(exp_id, number, flush=True)
""")


def schema_url(url: str, schema: str) -> str:
    """A fresh schema `schema` of the database at `url`."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def start(url: str, writers: int, experiments: int) -> list[tuple[str, subprocess.Popen]]:
    """The writer processes, started at once on a store that exists."""
    open_store(url).close()
    environment = dict(os.environ, DLBS_BENCH_STORE=url, PYTHONPATH=str(REPO))
    return [(f"w{index}", subprocess.Popen([sys.executable, "-c", WRITER, f"w{index}",
                                            str(experiments)], env=environment,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True))
            for index in range(writers)]


def printed(output: str) -> set[tuple[str, int]]:
    """The (exp_id, attempt) pairs a writer printed (committed)."""
    words = output.split()
    return {(words[i], int(words[i + 1])) for i in range(0, len(words) - 1, 2)}


def stored(url: str) -> list[tuple[str, int, str | None]]:
    """(exp_id, attempt, status) of every stored attempt."""
    with open_store(url) as store:
        return [(a.exp_id, a.attempt, a.status) for a in store.attempts()]


def round_all(url: str, writers: int, experiments: int) -> None:
    """Every writer to the end: exactly writers x experiments, each once."""
    began = time.perf_counter()
    processes = start(url, writers, experiments)
    reported: set[tuple[str, int]] = set()
    for name, process in processes:
        out, err = process.communicate(timeout=3600)
        if process.returncode != 0:
            raise SystemExit(f"writer {name} failed: {err}")
        reported |= printed(out)
    wall = time.perf_counter() - began
    rows = stored(url)
    pairs = [(exp_id, attempt) for exp_id, attempt, _ in rows]
    shared = sorted(a for e, a in pairs if e == "shared-0")
    assert len(rows) == writers * experiments, len(rows)
    assert len(set(pairs)) == len(pairs) and set(pairs) == reported
    assert {status for _, _, status in rows} == {"ok"}
    assert shared == list(range(1, writers + 1)), shared
    print(f"{writers} writers x {experiments} experiments: {len(rows)} attempts stored, each "
          f"once, none lost; {wall:.1f} s wall, {len(rows) / wall:.0f} attempts/s "
          f"(start and end: two transactions each)", flush=True)


def round_killed(url: str, writers: int, experiments: int) -> None:
    """One writer killed midway: whatever it printed is there; the others finish."""
    processes = start(url, writers, experiments)
    victim_name, victim = processes[0]
    lines: list[str] = []
    assert victim.stdout is not None
    for line in victim.stdout:
        lines.append(line)
        if len(lines) >= experiments // 3:
            victim.send_signal(signal.SIGKILL)
            break
    victim.wait(timeout=60)
    reported = printed("".join(lines))
    others: set[tuple[str, int]] = set()
    for name, process in processes[1:]:
        out, err = process.communicate(timeout=3600)
        if process.returncode != 0:
            raise SystemExit(f"writer {name} failed: {err}")
        others |= printed(out)
    rows = stored(url)
    ended = {(exp_id, attempt) for exp_id, attempt, status in rows if status == "ok"}
    opened = [(exp_id, attempt) for exp_id, attempt, status in rows if status is None]
    assert reported <= ended, sorted(reported - ended)[:5]
    assert others <= ended and len(others) == (writers - 1) * experiments
    assert len(opened) <= 1   # at most the attempt in flight when the kill came
    print(f"kill -9 of writer {victim_name} after {len(reported)} attempts: all "
          f"{len(reported)} it reported are stored and ended; {len(ended)} ended in all, "
          f"{len(opened)} left open (in flight at the kill; the next run closes it); the "
          f"other {writers - 1} writers finished", flush=True)


def main() -> None:
    """Both rounds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("DLBS_TEST_POSTGRES_URL"))
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--experiments", type=int, default=500)
    args = parser.parse_args()
    if not args.url:
        raise SystemExit("--url (or DLBS_TEST_POSTGRES_URL): run .ci/services/postgres.sh")
    round_all(schema_url(args.url, "bench_writers"), args.writers, args.experiments)
    round_killed(schema_url(args.url, "bench_writers_kill"), args.writers, args.experiments)


if __name__ == "__main__":
    main()
