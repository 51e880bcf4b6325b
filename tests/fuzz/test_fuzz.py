"""The fuzz suite in CI: each target for a fixed time, in its own bounded process.

The spec language, plan files, logs and the command line (`targets.py`) get the same
seeds on every run (seeds 0, 1, 2, ... until the time is up), so that CI is repeatable;
`bench/fuzz/run.py` runs them for longer with fresh seeds. The time per target is one knob:
`pytest --fuzz-seconds S`, or DLBS_FUZZ_SECONDS (default 15, tests/conftest.py). A failure
prints the smallest input that breaks the contract of docs/security.md: a traceback, a hang
(an example of more than 30 s) or an allocation past the process's 4 GiB.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.fuzz.targets import TARGETS


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzz_target_finds_no_traceback_hang_or_runaway_allocation(target, fuzz_seconds):
    result = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.harness", target, "--seconds", str(fuzz_seconds)],
        cwd=REPO, capture_output=True, text=True, timeout=fuzz_seconds * 4 + 120,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    output = (result.stdout + result.stderr)[-6000:]
    assert result.returncode == 0, output
    assert f"fuzz {target}: " in result.stdout and "no failure" in result.stdout, output
    examples = int(result.stdout.split(f"fuzz {target}: ")[1].split()[0])
    assert examples >= 25, f"only {examples} examples ran: {output}"
