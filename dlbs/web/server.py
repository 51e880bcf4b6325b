"""The HTTP server of `dlbs serve`: uvicorn, with a deadline for every request's head.

uvicorn closes an idle connection only between requests (its keep-alive timeout): a client
that opens a connection and sends half a request line, or headers that never end, holds it
open for ever, and enough of them hold every file descriptor (slowloris). `HeadDeadline`
gives each request's head (request line and headers) HEAD_TIMEOUT seconds from the moment
the server starts waiting for it; a connection still waiting then is closed. Connections at
once are bounded too (uvicorn's `limit_concurrency`: beyond it, 503), and so is a head's
size (h11's 16 KiB).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

#: Seconds a connection may take to send a request's head (line and headers).
HEAD_TIMEOUT = 10.0
#: Keep-alive: seconds an idle connection is kept between requests (uvicorn's default 5).
KEEP_ALIVE = 5
#: Connections (and requests in flight) at once; beyond them uvicorn answers 503.
CONNECTIONS = 64


class HeadDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's head (see the module)."""

    head_timeout = HEAD_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the deadline of the first request's head."""
        self._head_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Pass the bytes on; a head complete stops the deadline."""
        super().data_received(data)
        if self.cycle is not None and not self.cycle.response_complete:
            self._disarm()          # a request is being answered

    def on_response_complete(self) -> None:
        """The next request's head has its deadline (besides uvicorn's keep-alive)."""
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """No deadline for a closed connection."""
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_expired)

    def _disarm(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
            self._head_timer = None

    def _head_expired(self) -> None:
        self._head_timer = None
        if self.cycle is None or self.cycle.response_complete:
            self.transport.close()   # still waiting for a head: the client's time is up


def config(app: Any, host: str, port: int, head_timeout: float = HEAD_TIMEOUT) -> Any:
    """The uvicorn configuration of `dlbs serve` (see the module)."""
    import uvicorn

    protocol = type("HeadDeadline", (HeadDeadline,), {"head_timeout": head_timeout})
    return uvicorn.Config(app, host=host, port=port, http=protocol, log_level="warning",
                          access_log=False, server_header=False,
                          timeout_keep_alive=KEEP_ALIVE, limit_concurrency=CONNECTIONS)
