"""A fork server for the backends that `dlbs run` starts in the tests (tests/zygote/README.md).

`python server.py INFO MODULES_JSON` imports the modules, listens on a Unix socket beside INFO,
then writes INFO (the socket and the variables a library reads when it loads, as this server
saw them) for tests/zygote/sitecustomize.py to find. Each connection is one run: the client
sends its argv, environment and working directory with its fds 0, 1 and 2; the server forks
a child that runs the script on those fds (tests/zygote/forked.py), answers the child's pid,
and when the child ends, its exit status (negative: the signal that ended it). The child
SIGKILLs itself when the client goes away (a SIGKILL of the client's process group).
One thread: a fork never copies a lock another thread holds. Ends when its stdin closes.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
import threading
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forked  # noqa: E402
from sitecustomize import load_time_environment  # noqa: E402

del sys.path[0]
#: As the server started: importing torch sets TORCHINDUCTOR_CACHE_DIR for its subprocesses.
LOAD_TIME_ENVIRONMENT = load_time_environment(os.environ)
for name in json.loads(sys.argv[2]):
    __import__(name)
SITE = forked.site_of_this_interpreter()
#: The most a request may hold (argv and environment as JSON).
MAX_REQUEST = 1 << 20


def receive(conn: socket.socket) -> tuple[dict, list[int]]:
    """One request: a length line, the JSON, and three fds with the first bytes."""
    data, fds, _, _ = socket.recv_fds(conn, 65536, 3)
    head, _, body = data.partition(b"\n")
    size = int(head)
    if size > MAX_REQUEST:
        raise ValueError("request too large")
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            raise ConnectionError("the client went away")
        body += more
    if len(fds) != 3:
        raise ValueError("three fds expected")
    return json.loads(body), fds


def child(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: take the client's fds, die with the client, run the script."""
    signal.set_wakeup_fd(-1)
    for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)

    def follow_the_client() -> None:
        conn.settimeout(None)
        try:
            conn.recv(1)
        finally:  # the client sends nothing: it ended
            os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=follow_the_client, name="dlbs-tests-zygote", daemon=True).start()
    forked.become(request["argv"], request["env"], request["cwd"], SITE)


def serve(listener: socket.socket) -> None:
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the tests' to handle
    clients: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_read, selectors.EVENT_READ, "reap")
    selector.register(sys.stdin, selectors.EVENT_READ, "stdin")
    while True:
        for key, _ in selector.select(timeout=1.0):
            if key.data == "stdin" and not sys.stdin.buffer.read1(4096):
                return
            if key.data == "reap":
                try:
                    while os.read(wake_read, 4096):
                        pass
                except BlockingIOError:
                    pass
            if key.data == "accept":
                conn, _ = listener.accept()
                try:
                    conn.settimeout(10)
                    request, fds = receive(conn)
                except (OSError, ValueError):
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    try:
                        selector.close()
                        listener.close()
                        for other in clients.values():
                            other.close()
                        os.close(wake_read)
                        os.close(wake_write)
                        child(conn, request, fds)
                    except BaseException:
                        traceback.print_exc()
                    finally:
                        os._exit(127)
                for fd in fds:
                    os.close(fd)
                clients[pid] = conn
                try:
                    conn.sendall(f"{pid}\n".encode())
                except OSError:
                    pass
        reap(clients)


def reap(clients: dict[int, socket.socket]) -> None:
    """Answer each ended child's client with its exit status."""
    while clients:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = clients.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass
            conn.close()


def main() -> None:
    info = sys.argv[1]
    path = info[:-len(".json")] + ".sock"
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    partial = info + ".part"
    with open(partial, "w") as out:
        json.dump({"socket": path, "env": LOAD_TIME_ENVIRONMENT}, out)
    os.replace(partial, info)
    try:
        serve(listener)
    finally:
        os.unlink(info)
        os.unlink(path)


if __name__ == "__main__":
    main()
