"""A trace of hundreds of MB is streamed: `dlbs trace` memory does not grow with the file.

Memory is what is measured (the peak resident set of a `dlbs trace` process), never time.
"""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

#: One traced step of the generated trace: its spans, operators and kernels.
LAYERS, OPERATORS_PER_LAYER, KERNELS_PER_LAYER = 40, 20, 2
PEAK_RSS = """
import sys
from dlbs.cli.main import main
status = main(["trace", *sys.argv[1:], "--format", "json", "-o", "/dev/null"])
with open("/proc/self/status") as lines:
    peak = next(int(line.split()[1]) for line in lines if line.startswith("VmHWM:"))
print(status, peak // 1024)
"""


# One event of each kind, as json.dumps writes it; filled in by `%` (floats by their repr, as
# json.dumps writes them): the big trace's million events are written in seconds.
_STEP = ('{"ph": "X", "cat": "dlbs.step", "name": "step", "ts": %r, "dur": 99000.0, "pid": 1, '
         '"tid": 1, "args": {"batch": %d}}')
_PHASE = ('{"ph": "X", "cat": "dlbs.phase", "name": "forward", "ts": %r, "dur": 50000.0, '
          '"pid": 1, "tid": 1, "args": {"batch": %d}}')
_LAYER = ('{"ph": "X", "cat": "dlbs.layer", "name": "layer%d", "ts": %r, "dur": 900.0, '
          '"pid": 1, "tid": 1, "args": {"batch": %d, "parent": "", "depth": 0}}')
_OPERATOR = ('{"ph": "X", "cat": "cpu_op", "name": "aten::op%d", "ts": %r, "dur": 30.0, '
             '"pid": 1, "tid": 1, "args": {"External id": %d, '
             '"Input Dims": [[64, 256, 56, 56]]}}')
_KERNEL = ('{"ph": "X", "cat": "kernel", "name": "gemm_%d", "ts": %r, "dur": 250.0, "pid": 0, '
           '"tid": 7, "args": {"dlbs.layer": "layer%d", "correlation": %d}}')


def write_big_trace(path, steps: int) -> int:
    """A gzip-compressed trace with `steps` steps (about 1,000 events each); its JSON size."""
    size = 0
    with gzip.open(path, "wt", compresslevel=1) as stream:
        def write(text: str) -> None:
            nonlocal size
            size += len(text)
            stream.write(text)

        write('{"dlbs": {"trace_level": "kernel", "format": 1}, "traceEvents": [\n')
        for step in range(steps):
            start = step * 100_000.0
            events = [_STEP % (start, step), _PHASE % (start, step)]
            for index in range(LAYERS):
                at = start + index * 1_000.0
                events.append(_LAYER % (index, at, step))
                events += [_OPERATOR % (op % 7, at + op * 40.0, step * 10_000 + op)
                           for op in range(OPERATORS_PER_LAYER)]
                events += [_KERNEL % (kernel, at + kernel * 300.0, index, step * 100 + kernel)
                           for kernel in range(KERNELS_PER_LAYER)]
            write(("" if step == 0 else ",\n") + ",\n".join(events))
        write("\n]}\n")
    return size


def peak_mib(*arguments: str) -> int:
    done = subprocess.run([sys.executable, "-c", PEAK_RSS, *arguments], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    status, peak = done.stdout.split()
    assert status == "0", done.stderr
    return int(peak)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("big")
    small, big = folder / "small.json.gz", folder / "big.json.gz"
    write_big_trace(small, steps=2)
    size = write_big_trace(big, steps=1100)
    return small, big, size


@pytest.mark.parametrize("view", ["summary", "kernels"])
def test_memory_does_not_grow_with_the_trace(traces, view):
    small, big, size = traces
    assert size > 150 * 2**20  # the JSON inside the big trace: well over 150 MiB
    baseline = peak_mib(str(small), "--view", view)
    streamed = peak_mib(str(big), "--view", view)
    # json.load of this trace would take gigabytes; streaming it adds a few MiB of aggregates.
    assert streamed - baseline < 40, (view, baseline, streamed)


def test_eventflow_keeps_only_the_events_it_lists(traces):
    small, big, _ = traces
    baseline = peak_mib(str(small), "--view", "eventflow", "--top", "100")
    streamed = peak_mib(str(big), "--view", "eventflow", "--top", "100")
    assert streamed - baseline < 40, (baseline, streamed)


def test_operators_keep_a_few_dozen_bytes_per_call(traces):
    # The operators view keeps each call's start, length and name until the file is read
    # (docs/tracing.md, "Big traces"): 880,000 calls here.
    small, big, _ = traces
    calls = 1100 * LAYERS * OPERATORS_PER_LAYER
    baseline = peak_mib(str(small), "--view", "operators")
    streamed = peak_mib(str(big), "--view", "operators")
    assert streamed - baseline < calls * 64 / 2**20, (baseline, streamed)
