"""A worker process of `postwire serve` (see `postwire.workers`): reads its orders from stdin,
then runs the spool, delivery and SMTP submission on the inherited sockets until SIGTERM.

The entry point lives apart from `postwire.workers` because it starts the whole supervisor
(`postwire.app`), which itself starts workers: the two would import each other.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import socket
import sys

import trio

from postwire import app
from postwire.cli import configure_logging
from postwire.errors import PostwireError
from postwire.smtp.submission import ListeningSocket
from postwire.workers import ORDERS_LENGTH_BYTES, READY_LINE, WorkerOrders

log = logging.getLogger("postwire.workers")


def _read_orders() -> WorkerOrders:
    stdin = sys.stdin.buffer
    length = int.from_bytes(stdin.read(ORDERS_LENGTH_BYTES), "big")
    orders = pickle.loads(stdin.read(length))
    if not isinstance(orders, WorkerOrders):
        raise SystemExit("postwire worker: no orders on stdin (started by `postwire serve` only)")
    return orders


async def _stop_when_orphaned() -> None:
    """SIGTERM this process once the first process is gone (stdin reads end of file)."""
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    while await stdin.receive_some():
        pass
    log.warning("the first process is gone; stopping")
    os.kill(os.getpid(), signal.SIGTERM)


def _listening_socket(fd: int) -> socket.socket:
    """The inherited listening socket `fd`, non-blocking as the first process made it. Its
    blocking mode is shared by every process: a socket object left blocking would make the
    first duplicate taken of it (`dup` copies the mode) turn every process's accept blocking."""
    sock = socket.socket(fileno=fd)
    sock.setblocking(False)
    return sock


def main() -> None:
    """A worker process: read orders from stdin, serve until SIGTERM."""
    # A SIGHUP passed on before the supervisor listens for it must not end the process (its
    # default); the certificate is read after that anyway.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    orders = _read_orders()
    configure_logging(f"worker {orders.index}", json_lines=orders.config.log_format == "json")
    listeners = [
        ListeningSocket(_listening_socket(fd), implicit_tls)
        for fd, implicit_tls in orders.listeners
    ]

    def report_ready() -> None:
        sys.stdout.buffer.write(READY_LINE)
        sys.stdout.buffer.flush()

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_stop_when_orphaned)
            await app.run_worker(orders.config, orders.index, listeners, report_ready)
            nursery.cancel_scope.cancel()

    try:
        trio.run(serve)
    except* PostwireError as group:
        for exc in group.exceptions:
            log.error("%s", exc)
        sys.exit(1)
