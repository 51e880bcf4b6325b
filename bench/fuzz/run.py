"""Long fuzz runs: every target of tests/fuzz for a given time, with fresh seeds.

    python bench/fuzz/run.py [--seconds 600] [--targets spec,expression,plan,log,cli]

Each target runs in its own process (bounded memory, a watchdog per example; see
tests/fuzz/harness.py). Prints, per target, the examples run and their rate, or the input
that broke the contract of docs/security.md; exits 1 when any target failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.fuzz.targets import TARGETS  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="per target")
    parser.add_argument("--targets", default=",".join(sorted(TARGETS)))
    args = parser.parse_args()
    failed = []
    print(f"{'target':>12} {'examples':>10} {'seconds':>8} {'per s':>8}  result")
    for target in args.targets.split(","):
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "tests.fuzz.harness", target, "--seconds", str(args.seconds),
             "--random"], cwd=REPO, capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)})
        elapsed = time.monotonic() - started
        line = next((line for line in result.stdout.splitlines()
                     if line.startswith(f"fuzz {target}: ")), "")
        examples = int(line.split(": ")[1].split()[0]) if line else 0
        status = "no failure" if result.returncode == 0 else "FAILED"
        print(f"{target:>12} {examples:>10} {elapsed:>8.1f} {examples / elapsed:>8.1f}  {status}")
        if result.returncode != 0:
            failed.append(target)
            print((result.stdout + result.stderr)[-8000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
