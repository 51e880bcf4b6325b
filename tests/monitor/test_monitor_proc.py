"""Reading /proc: stat parsing (table-driven) and the process tree of real processes."""

from __future__ import annotations

import os

import pytest

from dlbs.monitor import proc

# (stat text, expected (ppid, state, cpu ticks, start ticks, rss pages) or None)
STAT_CASES = [
    pytest.param(
        b"1234 (python3) S 1200 1234 1200 0 -1 4194304 500 0 0 0 150 25 0 0 20 0 3 0 "
        b"98765 500000000 4096 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
        (1200, "S", 175, 98765, 4096), id="plain",
    ),
    pytest.param(
        b"77 (a b) (c)) R 5 77 5 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 "
        b"42 1000 10 0\n",
        (5, "R", 10, 42, 10), id="comm with spaces and parentheses",
    ),
    pytest.param(
        b"9 (zombie) Z 1 9 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 0 0 0\n",
        (1, "Z", 2, 5, 0), id="zombie",
    ),
    pytest.param(b"9 (cut short) S 1 9", None, id="truncated"),
    pytest.param(b"no parenthesis at all", None, id="garbage"),
    pytest.param(b"9 (x) S one 9 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 0 0 0\n", None,
                 id="not a number"),
]


@pytest.mark.parametrize(("text", "expected"), STAT_CASES)
def test_parse_stat(text, expected):
    stat = proc.parse_stat(1, text)
    if expected is None:
        assert stat is None
    else:
        assert (stat.ppid, stat.state, stat.cpu_ticks, stat.start_ticks,
                stat.rss_pages) == expected


def test_read_stat_of_this_process_matches_status():
    stat = proc.read_stat(os.getpid())
    assert stat is not None and stat.ppid == os.getppid() and not stat.exited
    with open(f"/proc/{os.getpid()}/status") as status:
        vm_rss_kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    # The same counter, read a moment apart.
    assert abs(stat.rss_pages * proc.PAGE_SIZE / 1024 - vm_rss_kib) < 4096


def test_read_stat_of_a_missing_process_is_none():
    assert proc.read_stat(2**22 + 12345) is None


def test_process_tree_finds_children_and_grandchildren(spawn):
    child = spawn("import subprocess, sys, time; "
                  "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
                  "print(c.pid, flush=True); time.sleep(30)")
    grandchild = int(child.stdout.readline())
    tree = proc.process_tree(child.pid, proc.scan_processes())
    assert [p.pid for p in tree] == [child.pid, grandchild]
    # A tree rooted higher up holds them too; an unknown root gives nothing.
    everything = proc.process_tree(os.getpid(), proc.scan_processes())
    assert {child.pid, grandchild} <= {p.pid for p in everything}
    assert proc.process_tree(2**22 + 12345, proc.scan_processes()) == []


def test_rss_mib_sums_the_tree():
    fake = [proc.ProcessStat(1, 0, "S", 0, 0, 256), proc.ProcessStat(2, 1, "S", 0, 0, 256)]
    assert proc.rss_mib(fake) == pytest.approx(512 * proc.PAGE_SIZE / 2**20)
