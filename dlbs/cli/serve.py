"""`dlbs serve DB`: a read-only web application over a results store (docs/results.md).

Binds to 127.0.0.1:8050 by default: a store's contents are for the people who may read it,
so another address is the user's explicit choice, and serving on one that is not this
machine's loopback says what it exposes, to whom. Stops on Ctrl-C.
"""

from __future__ import annotations

import argparse
import socket
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `dlbs serve`."""
    parser.add_argument("store", metavar="DB",
                        help="a results database: an SQLite file or a postgresql:// URL")
    parser.add_argument("--host", default="127.0.0.1",
                        help="the address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8050, help="the port (default 8050)")


def run(args: argparse.Namespace) -> int:
    """Open the store, then serve until interrupted."""
    import uvicorn

    from dlbs.errors import DlbsError
    from dlbs.web import create_app
    from dlbs.web.server import config

    if not 0 <= args.port <= 65535:
        raise DlbsError(f"--port {args.port}: not a port number")
    app = create_app(store_of(args.store))   # opens the store now: a bad one fails here
    listening = listen(args.host, args.port)
    exposed = exposure(args.host)
    if exposed:
        print(f"dlbs serve: warning: --host {args.host} {exposed}: anyone who can reach port "
              f"{args.port} there reads every result, log, trace and parameter of "
              f"{app.state.store_name}, with no password (put an authenticating proxy in "
              "front: docs/results.md)", file=sys.stderr, flush=True)
    print(f"dlbs serve: http://{args.host}:{args.port}/ (Ctrl-C stops)", file=sys.stderr,
          flush=True)
    with listening:
        uvicorn.Server(config(app, args.host, args.port)).run(sockets=[listening])
    return 0


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to (`host`, `port`); a taken port or a foreign address: one error."""
    from dlbs.errors import DlbsError

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        listening = socket.socket(family, kind, proto)
        try:
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listening.bind(address)
            listening.listen(128)
        except OSError:
            listening.close()
            raise
    except OSError as error:   # the port is taken, the address is not ours, no such name
        raise DlbsError(f"cannot listen on {host}:{port}: "
                        f"{getattr(error, 'strerror', None) or error}") from error
    listening.set_inheritable(True)
    return listening


def store_of(location: str) -> str:
    """The store to serve: `location`, or the results.db of a log folder (as reports read)."""
    import os

    from dlbs.errors import DlbsError
    from dlbs.results.sources import DATABASE_NAME as DATABASE
    from dlbs.results.sources import folder_databases

    if not os.path.isdir(location):
        return location
    found = folder_databases(location)
    if len(found) == 1:
        print(f"dlbs serve: serving {found[0]}, the results database of {location}",
              file=sys.stderr)
        return found[0]
    if not found:
        raise DlbsError(f"{location} is a folder with no results database ({DATABASE})",
                        hint=f"serve a results database: dlbs serve FOLDER/{DATABASE}, or a "
                             "postgresql:// URL; `dlbs results copy FOLDER STORE` makes one "
                             "of a folder's logs")
    shown = ", ".join(found[:5]) + (" ..." if len(found) > 5 else "")
    raise DlbsError(f"{location} holds {len(found)} results databases ({shown})",
                    hint="serve one of them, or copy them into one store with `dlbs results "
                         "copy` (docs/results.md)")


def exposure(host: str) -> str | None:
    """What listening on `host` exposes the store to, in words; None for this machine only."""
    import ipaddress

    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        if host.lower() == "localhost":
            return None
        return f"(a name: whatever addresses {host} resolves to)"
    if address.is_loopback:
        return None
    if address.is_unspecified:
        return "listens on every network interface of this machine"
    return f"listens on {address}, an address other machines may reach"
