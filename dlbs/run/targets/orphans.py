"""An attempt's processes on this host: found by the token they carry, and stopped.

A local attempt's whole process tree carries the attempt's token in its environment
(`<variable>=<token>`, inherited by everything it starts: processes that left its group or
its session, daemonized workers, `setsid` children). Only a process that carries the token
is ever stopped (docs/running.md, "After kill -9 of dlbs"; docs/security.md): a pid, a
process group or a start time read from a results database names no process by itself, so
an attempt row crafted with another process's pid stops nothing. The tree also carries its
owner, the dlbs run that started it (`<owner variable>=` `owner_identity()`): a process whose
owner still runs, and is not this process, belongs to a live run and is never stopped, even
when another run holds its token. What is found is stopped as a timeout stops a benchmark:
SIGTERM, SIGKILL after a grace period; the run that started it does so when the attempt ends
(`dlbs.run.targets.local`), a later run after a `kill -9` of dlbs. This process and its own
group are never touched.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
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


@functools.cache
def owner_identity() -> str:
    """The identity of the running dlbs, which what it starts carries: pid, start, boot, host."""
    return f"{os.getpid()}:{start_ticks(os.getpid())}:{boot_id()}:{socket.gethostname()}"


def owner_lives(identity: str, elsewhere: bool = True) -> bool:
    """Whether `identity` (`owner_identity()`) names a dlbs run, other than this one, that runs.

    A run of another host or another boot cannot be looked at from here: `elsewhere` says
    what to take it for. Text that names no run (an older dlbs set none) names none that runs.
    """
    pid_text, _, rest = identity.partition(":")
    start_text, _, rest = rest.partition(":")
    boot, _, host = rest.partition(":")
    if not (pid_text.isdigit() and start_text.isdigit() and boot and host):
        return False
    if host != socket.gethostname() or boot != boot_id():
        return elsewhere
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    running = _running(pid)
    return running is not None and running.start == int(start_text)


def find_tree(variable: str, token: str, owner_variable: str | None = None
              ) -> dict[int, ProcessFacts]:
    """The running processes that carry `<variable>=<token>`; see the module doc.

    With `owner_variable`, a process whose owner (`owner_lives`) still runs is left out.
    """
    if not token:
        return {}
    needle = f"{variable}={token}".encode()
    owner = owner_variable.encode() + b"=" if owner_variable else None
    mine = {os.getpid(), os.getpgrp()}
    found: dict[int, ProcessFacts] = {}
    for candidate in _all_pids():
        if candidate in mine:
            continue
        process = _running(candidate)
        if process is None or process.group in mine:
            continue
        environment = _environment(candidate)
        if needle not in environment:
            continue
        if owner is not None and any(owner_lives(entry[len(owner):].decode("utf-8", "replace"))
                                     for entry in environment if entry.startswith(owner)):
            continue
        found[candidate] = process
    return found


def _environment(pid: int) -> list[bytes]:
    """The `NAME=value` entries of a process's environment; [] when it cannot be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as stream:
            return stream.read().split(b"\0")
    except OSError:  # gone, or another user's: not ours to stop
        return []


def stop_tree(variable: str, token: str, grace: float, owner_variable: str | None = None,
              rounds: int = 5) -> list[ProcessFacts]:
    """Stop what `find_tree` finds (SIGTERM, then SIGKILL after `grace` s); what it found.

    Looked for again after each round, up to `rounds` times: a shell loop or a launcher may
    start new processes while the others are being stopped.
    """
    stopped: dict[int, ProcessFacts] = {}
    for number in range(rounds):
        found = find_tree(variable, token, owner_variable)
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
