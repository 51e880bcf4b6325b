"""Run one fuzz target for a fixed time, in a process of bounded memory, with a watchdog.

    python -m tests.fuzz.harness TARGET [--seconds 20] [--seed 0] [--random]

Hypothesis draws the inputs (`targets.py`), in batches of examples with seeds 0, 1, 2, ...
(`--random`: fresh seeds, for long runs), until the time is up. What counts as a failure:
- an exception other than a one-line `DlbsError` (hypothesis shrinks it and prints the
  smallest input that raises it);
- a hang: one example running longer than `--example-seconds` (faulthandler prints every
  thread's stack, then ends the process with status 1);
- an unbounded allocation: the address space is capped (`--memory-mib`), so an allocation
  past it is a MemoryError, reported like any exception.
The last line says how many examples ran: `fuzz spec: 1234 examples in 20.0 s, no failure`.
"""

from __future__ import annotations

import argparse
import faulthandler
import random
import resource
import sys
import time
from typing import Any

from hypothesis import HealthCheck, given, seed, settings

from tests.fuzz.targets import TARGETS


def cap_memory(mebibytes: int) -> None:
    """Cap this process's address space: past it, allocations fail with MemoryError."""
    limit = mebibytes * 2**20
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def run(name: str, seconds: float, first_seed: int, fresh: bool, example_seconds: float,
        batch: int) -> int:
    target, strategy = TARGETS[name]
    count = 0

    def watched(case: Any) -> None:
        nonlocal count
        count += 1
        faulthandler.dump_traceback_later(example_seconds, exit=True)
        try:
            target(case)
        finally:
            faulthandler.cancel_dump_traceback_later()

    started = time.monotonic()
    batch_seed = first_seed
    while time.monotonic() - started < seconds:
        test = settings(max_examples=batch, deadline=None, database=None, derandomize=False,
                        suppress_health_check=list(HealthCheck),
                        print_blob=True)(given(strategy)(watched))
        seed(random.getrandbits(64) if fresh else batch_seed)(test)()
        batch_seed += 1
    elapsed = time.monotonic() - started
    print(f"fuzz {name}: {count} examples in {elapsed:.1f} s, no failure", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0, help="the first batch's seed")
    parser.add_argument("--random", action="store_true", help="fresh seeds (long runs)")
    parser.add_argument("--example-seconds", type=float, default=30.0,
                        help="an example running longer is a hang")
    parser.add_argument("--memory-mib", type=int, default=4096,
                        help="the address space of the process")
    parser.add_argument("--batch", type=int, default=25, help="examples per seed")
    args = parser.parse_args(argv)
    cap_memory(args.memory_mib)
    faulthandler.enable()
    return run(args.target, args.seconds, args.seed, args.random, args.example_seconds,
               args.batch)


if __name__ == "__main__":
    sys.exit(main())
