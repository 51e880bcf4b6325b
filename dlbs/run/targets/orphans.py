"""What a dead `dlbs run` left running on this host: found by what was recorded, and stopped.

A local attempt's process tree is found two ways (docs/running.md, "After kill -9 of dlbs"):
- its process group: the group whose leader still runs with the recorded pid AND the
  recorded start time (clock ticks since boot, `/proc/<pid>/stat`) on the same boot
  (`/proc/sys/kernel/random/boot_id`), so that a pid the kernel gave to another process
  since is never taken for it;
- its mark: every process whose environment holds `<variable>=<token>`, which all it
  started inherit: processes that left the group (daemonized workers), and a benchmark that
  dlbs started but died before recording its pid.
What is found is stopped as a timeout stops a benchmark: SIGTERM, SIGKILL after a grace
period. This process and its own group are never touched.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

BOOT_ID = "/proc/sys/kernel/random/boot_id"


@dataclass(frozen=True)
class ProcessFacts:
    """What /proc says of one process."""

    pid: int
    name: str
    state: str
    group: int
    start: int


def boot_id() -> str:
    """The id of the current boot ("" where /proc does not tell it)."""
    try:
        with open(BOOT_ID, encoding="ascii") as stream:
            return stream.read().strip()
    except OSError:
        return ""


def facts(pid: int) -> ProcessFacts | None:
    """/proc/<pid>/stat of a process, or None when there is no such process (any more)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            text = stream.read().decode("utf-8", "replace")
    except OSError:
        return None
    # The name is in parentheses and may hold blanks and parentheses: split at the last one.
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    try:
        return ProcessFacts(pid, head.partition("(")[2], fields[0], int(fields[2]),
                            int(fields[19]))
    except (IndexError, ValueError):
        return None


def start_ticks(pid: int) -> int | None:
    """When the process started, in clock ticks since boot; None if it is gone."""
    found = facts(pid)
    return found.start if found else None


def _running(pid: int) -> ProcessFacts | None:
    found = facts(pid)
    return found if found is not None and found.state not in ("Z", "X") else None


def _all_pids() -> list[int]:
    try:
        return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []


def _has_variable(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as stream:
            return needle in b"\0" + stream.read()
    except OSError:  # gone, or another user's: not ours to stop
        return False


def find_tree(pid: int | None, start: int | None, variable: str, token: str
              ) -> dict[int, ProcessFacts]:
    """The processes of a recorded tree that still run: its group, and those with its mark."""
    return _find(_confirmed_group(pid, start), variable, token)


def _confirmed_group(pid: int | None, start: int | None) -> int | None:
    """The recorded process group, when its leader still runs with the recorded start time.

    Once confirmed, the number stays the group's while any member lives: the kernel never
    gives a pid that is a live group's id to another process.
    """
    leader = _running(pid) if pid else None
    return pid if leader is not None and leader.start == start else None


def _find(group: int | None, variable: str, token: str) -> dict[int, ProcessFacts]:
    mine = {os.getpid(), os.getpgrp()}
    needle = b"\0" + f"{variable}={token}".encode() + b"\0" if token else b""
    found: dict[int, ProcessFacts] = {}
    for candidate in _all_pids():
        if candidate in mine:
            continue
        process = _running(candidate)
        if process is None or process.group in mine:
            continue
        if (group is not None and process.group == group) or \
                (needle and _has_variable(candidate, needle)):
            found[candidate] = process
    return found


def stop_tree(pid: int | None, start: int | None, variable: str, token: str,
              grace: float, rounds: int = 5) -> list[ProcessFacts]:
    """Stop what `find_tree` finds (SIGTERM, then SIGKILL after `grace` s); what it found.

    Looked for again after each round, up to `rounds` times: a shell loop or a launcher may
    start new processes while the others are being stopped.
    """
    group = _confirmed_group(pid, start)
    stopped: dict[int, ProcessFacts] = {}
    for number in range(rounds):
        found = _find(group, variable, token)
        if not found:
            break
        stopped.update(found)
        _signal_each(found, signal.SIGTERM if number == 0 else signal.SIGKILL)
        deadline = time.monotonic() + (grace if number == 0 else 0.0)
        while _still_running(found) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _still_running(found):
            _signal_each(found, signal.SIGKILL)
            deadline = time.monotonic() + 10.0  # SIGKILL cannot be refused: waits on the kernel
            while _still_running(found) and time.monotonic() < deadline:
                time.sleep(0.05)
    return sorted(stopped.values(), key=lambda process: process.pid)


def _signal_each(found: dict[int, ProcessFacts], number: int) -> None:
    for pid, process in found.items():
        now = _running(pid)
        if now is None or now.start != process.start:
            continue  # ended meanwhile; its pid may belong to another process by now
        try:
            os.kill(pid, number)
        except (ProcessLookupError, PermissionError):
            pass


def _still_running(found: dict[int, ProcessFacts]) -> bool:
    for pid, process in found.items():
        now = _running(pid)
        if now is not None and now.start == process.start:
            return True
    return False
