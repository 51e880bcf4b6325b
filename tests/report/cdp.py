"""A small client of the Chrome DevTools protocol over --remote-debugging-pipe.

Chromium reads commands (JSON, each ended by a NUL byte) from file descriptor 3 and writes
responses and events to descriptor 4. No websocket, no port, no extra package: the page is
loaded by the real browser Debian ships, and we see every console message, exception and
network request it makes.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

# The flags of a quiet, offline, throw-away headless browser.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--remote-debugging-pipe", "--enable-logging=stderr", "--v=0")


def chromium_binary() -> str:
    """Debian's chromium (installed by .ci/services/chromium.sh)."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError("chromium is not installed: run .ci/services/chromium.sh")


class Browser:
    """A headless Chromium driven over the DevTools pipe; use as a context manager."""

    def __init__(self, profile: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        self._buffer = b""
        low_read, self._commands = os.pipe()
        self._replies, low_write = os.pipe()
        # The child's descriptors 3 and 4 must be these pipe ends. Moved above 10 first, so
        # that putting one on 3 cannot overwrite the other; the child dups them down, and
        # 3 and 4 are kept open through exec (the rest is closed after preexec_fn).
        commands_read = fcntl.fcntl(low_read, fcntl.F_DUPFD_CLOEXEC, 10)
        replies_write = fcntl.fcntl(low_write, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(low_read)
        os.close(low_write)

        def to_3_and_4() -> None:
            os.dup2(commands_read, 3)
            os.dup2(replies_write, 4)

        try:
            self.process = subprocess.Popen(
                [chromium_binary(), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                pass_fds=(3, 4), preexec_fn=to_3_and_4,
            )
        finally:
            os.close(commands_read)
            os.close(replies_write)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Ask the browser to quit; kill it if it does not."""
        if self.process.poll() is None:
            try:
                self.send("Browser.close")
            except (OSError, RuntimeError, TimeoutError):
                pass
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for fd in (self._commands, self._replies):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.process.stderr is not None:
            self.stderr = self.process.stderr.read().decode(errors="replace")
            self.process.stderr.close()

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send a command and wait for its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float | None = None) -> dict[str, Any]:
        """Wait for the event `method` (also when it already arrived)."""
        for event in self.events:
            if event.get("method") == method:
                return event
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            event = self._read(deadline)
            self.events.append(event)
            if event.get("method") == method:
                return event

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self._replies], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium closed the pipe (exit {self.process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def open_page(self, url: str) -> str:
        """A new tab with the console, network and log domains on; returns its session id.

        The tab starts blank and navigates only once every domain listens, so nothing the
        page does is missed.
        """
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session)
        self.send("Page.navigate", session, url=url)
        self.wait_for("Page.loadEventFired")
        return session


def is_problem(event: dict[str, Any]) -> bool:
    """Whether a DevTools event says the page went wrong.

    An exception, an error or warning on the console or in the log, a request that failed.
    """
    method, params = event.get("method"), event.get("params", {})
    if method == "Runtime.exceptionThrown":
        return True
    if method == "Runtime.consoleAPICalled":
        return params.get("type") in ("error", "warning", "assert")
    if method == "Log.entryAdded":
        return params.get("entry", {}).get("level") in ("error", "warning")
    return method == "Network.loadingFailed"
