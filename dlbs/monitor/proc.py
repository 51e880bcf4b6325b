"""A process tree's CPU time and resident memory, read from Linux's /proc.

One sample reads `/proc/<pid>/stat` of every process once: that file holds the parent pid
(to find the tree), user and system CPU time, the start time (to tell a reused pid from the
process seen before) and the resident set size, the same counter as `statm`'s resident and
`status`'s VmRSS. One read per process keeps a sample cheap; a node monitor also reads a new
process's `environ` once, to tell whether it carries its job's tag.

Stand-alone (standard library, Python 3.8): a SLURM job runs it on compute nodes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: Clock ticks per second, the unit of the CPU times in /proc/<pid>/stat.
CLOCK_TICKS: int = os.sysconf("SC_CLK_TCK")
#: Bytes per page, the unit of the resident set size in /proc/<pid>/stat.
PAGE_SIZE: int = os.sysconf("SC_PAGE_SIZE")

# Field numbers of proc(5), counted from 1 as the manual does; parsing starts at field 3.
_FIRST_FIELD_AFTER_COMM = 3
_STATE, _PPID, _UTIME, _STIME, _STARTTIME, _RSS = 3, 4, 14, 15, 22, 24


@dataclass(frozen=True)
class ProcessStat:
    """What one sample needs of a process."""

    pid: int
    ppid: int
    state: str
    cpu_ticks: int  # user + system time of all its threads, clock ticks
    start_ticks: int  # start time after boot, clock ticks: with pid, identifies the process
    rss_pages: int

    @property
    def exited(self) -> bool:
        """A zombie (exited, not yet waited for) or dead process."""
        return self.state in ("Z", "X", "x")


def parse_stat(pid: int, text: bytes) -> ProcessStat | None:
    """Parse the contents of /proc/<pid>/stat; None when it is not in the expected format.

    The command name (field 2) is in parentheses and may itself hold spaces and
    parentheses, so the fields are split after its last `)`.
    """
    _, paren, rest = text.rpartition(b")")
    if not paren:
        return None
    fields = rest.split()

    def field(number: int) -> bytes:
        return fields[number - _FIRST_FIELD_AFTER_COMM]

    try:
        return ProcessStat(
            pid=pid,
            ppid=int(field(_PPID)),
            state=field(_STATE).decode("ascii", "replace"),
            cpu_ticks=int(field(_UTIME)) + int(field(_STIME)),
            start_ticks=int(field(_STARTTIME)),
            rss_pages=max(0, int(field(_RSS))),
        )
    except (IndexError, ValueError):
        return None


def read_stat(pid: int, proc_root: str = "/proc") -> ProcessStat | None:
    """The stat of one process; None when it does not exist (any more)."""
    try:
        fd = os.open(f"{proc_root}/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        text = os.read(fd, 4096)
    except OSError:  # it exited between open and read
        return None
    finally:
        os.close(fd)
    return parse_stat(pid, text)


def environ_has(pid: int, entry: bytes, proc_root: str = "/proc") -> bool:
    """Whether `NAME=value` (`entry`) is in the environment process `pid` started with.

    False when it cannot be read (another user's process, or gone).
    """
    try:
        with open(f"{proc_root}/{pid}/environ", "rb") as stream:
            return entry in stream.read().split(b"\0")
    except OSError:
        return False


def scan_processes(proc_root: str = "/proc") -> dict[int, ProcessStat]:
    """The stat of every process visible now, by pid; processes that exit meanwhile are left out."""
    processes: dict[int, ProcessStat] = {}
    try:
        names = os.listdir(proc_root)
    except OSError:
        return processes
    for name in names:
        if not name.isdigit():
            continue
        stat = read_stat(int(name), proc_root)
        if stat is not None:
            processes[stat.pid] = stat
    return processes


def process_tree(root: int, processes: Mapping[int, ProcessStat]) -> list[ProcessStat]:
    """`root` and all its descendants among `processes` (root first); empty without root."""
    if root not in processes:
        return []
    children: dict[int, list[ProcessStat]] = {}
    for stat in processes.values():
        children.setdefault(stat.ppid, []).append(stat)
    tree = [processes[root]]
    seen = {root}
    index = 0
    while index < len(tree):
        for child in children.get(tree[index].pid, ()):
            if child.pid not in seen:  # pid 0's children include pid 0's own entries
                seen.add(child.pid)
                tree.append(child)
        index += 1
    return tree


def rss_mib(tree: Iterable[ProcessStat]) -> float:
    """Resident memory of the processes summed, MiB (a page shared by two counts twice)."""
    return sum(stat.rss_pages for stat in tree) * PAGE_SIZE / float(1 << 20)
