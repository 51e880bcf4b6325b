"""`dlbs serve DB`: a read-only web application over a results store (docs/results.md).

Binds to 127.0.0.1:8050 by default: a store's contents are for the people who may read it,
so another address is the user's explicit choice. Stops on Ctrl-C.
"""

from __future__ import annotations

import argparse
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

    if not 0 <= args.port <= 65535:
        raise DlbsError(f"--port {args.port}: not a port number")
    app = create_app(args.store)   # opens the store now: a bad one is an error before serving
    print(f"dlbs serve: http://{args.host}:{args.port}/ (Ctrl-C stops)", file=sys.stderr,
          flush=True)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning",
                    access_log=False, server_header=False)
    except OSError as error:   # the port is taken, the address is not ours
        raise DlbsError(f"cannot listen on {args.host}:{args.port}: "
                        f"{error.strerror or error}") from error
    return 0
