"""Accepting connections on a listening socket, for every listener of `postwire serve` (the
REST API, the dashboard, the metrics listener, SMTP submission).

Two things no single client may do to the process, which shares one table of file
descriptors among all its listeners:

- Exhaust it and stop the process. `accept()` failing for want of descriptors or memory
  (EMFILE, ENFILE, ENOBUFS, ENOMEM) pauses that listener and tries again, as Trio's
  `serve_listeners` does; the connections wait in the kernel's backlog meanwhile. asyncio's
  own accept loop reported EMFILE to its loop's exception handler, which trio-asyncio turns
  into an exception in the service nursery: SMTP accepts here instead, in Trio.
- Hold more than its share. Open connections are counted per client address (an IPv6
  client per /64) and per service; one past `cap` is refused (closed, or told so first by
  `refuse`). The count is this process's: connections are a process's own resource, so with
  `processes = N` the SMTP listeners, which every process accepts from, let one address hold
  up to N times the cap.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import resource
import socket
from collections.abc import Callable

import trio

from postwire.client_addresses import client_source
from postwire.config import env_var_name
from postwire.errors import ConfigError

log = logging.getLogger("postwire")

# accept() failed for want of a resource that frees itself as connections end.
CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# A connection that went away before it was accepted, or was refused by a firewall: the next.
IGNORABLE_ERRNOS = frozenset(
    {errno.ECONNABORTED, errno.EPERM, errno.EPROTO, errno.ENETDOWN, errno.ENOPROTOOPT}
    | {errno.EHOSTDOWN, errno.ENONET, errno.EHOSTUNREACH, errno.EOPNOTSUPP, errno.ENETUNREACH}
)
# How long a listener pauses when accept() finds no descriptor (Trio's `serve_listeners` too).
BACKOFF_SECONDS = 0.1


def listen_error(key: str, address: str, error: OSError) -> ConfigError:
    """What a listener that could not bind says: the address and port, the config key that
    asked for it and the environment variable that overrides it. A port already taken is told
    as such, not as a mistake in the key (`postwire serve` has refused earlier if another
    Postwire runs on the same data directory, so this is another program, or a Postwire with a
    data directory of its own)."""
    where = f"config key {key!r}, environment variable {env_var_name(key)}"
    if error.errno == errno.EADDRINUSE:
        port = address.rpartition(":")[2]
        return ConfigError(
            f"cannot listen on {address}: port {port} is already in use by another program "
            f"(asked for by {where}): stop that program, or choose another port there"
        )
    return ConfigError(f"cannot listen on {address} ({where}): {error.strerror or error}")


class ClientSlot:
    """One accepted connection's place in its client's count; `release` it once it closed
    (more than once is harmless)."""

    __slots__ = ("_clients", "_source")

    def __init__(self, clients: ClientConnections, source: str) -> None:
        self._clients: ClientConnections | None = clients
        self._source = source

    def release(self) -> None:
        if self._clients is not None:
            self._clients.release(self._source)
            self._clients = None


class ClientConnections:
    """Open connections of one service in this process, per client address, up to `cap`
    each (0: no cap)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._open: dict[str, int] = {}

    def admit(self, address: str) -> ClientSlot | None:
        """A slot for a new connection from `address`, or None if it holds `cap` already."""
        source = client_source(address)
        count = self._open.get(source, 0)
        if self.cap and count >= self.cap:
            return None
        self._open[source] = count + 1
        return ClientSlot(self, source)

    def release(self, source: str) -> None:
        count = self._open.pop(source) - 1
        if count:
            self._open[source] = count


def close_quietly(conn: socket.socket) -> None:
    """Refusing a connection: close it, nothing said."""
    conn.close()


async def accept_connections(
    listening: socket.socket,
    serve: Callable[[socket.socket, ClientSlot], None],
    clients: ClientConnections,
    *,
    name: str,
    refuse: Callable[[socket.socket], None] = close_quietly,
) -> None:
    """Accept connections on `listening` (non-blocking) for ever, handing each to `serve`,
    which must start serving it without waiting and release its slot once it closed. A
    connection past its client's cap goes to `refuse`, which closes it. Cancel to stop; the
    socket stays open (its owner closes it)."""
    # Every process accepting from a listener shares its blocking mode: a blocking accept()
    # would hold this whole thread while another process takes the connection.
    listening.setblocking(False)
    backing_off = False
    while True:
        try:
            conn, peer = listening.accept()
        except BlockingIOError:
            await trio.lowlevel.wait_readable(listening)
            continue
        except OSError as error:
            if error.errno in IGNORABLE_ERRNOS:
                continue
            if error.errno not in CAPACITY_ERRNOS:
                raise
            if not backing_off:
                backing_off = True
                log.warning(
                    "%s cannot accept connections: %s; pausing it until some close",
                    name,
                    error.strerror,
                )
            await trio.sleep(BACKOFF_SECONDS)
            continue
        if backing_off:
            backing_off = False
            log.info("%s accepts connections again", name)
        address = peer[0] if isinstance(peer, tuple) else ""
        slot = clients.admit(address)
        if slot is None:
            refuse(conn)
        else:
            try:
                serve(conn, slot)
            except BaseException:
                slot.release()
                conn.close()
                raise
        # One connection per pass: the listener never holds the thread while a flood lasts.
        await trio.lowlevel.checkpoint()


def raise_descriptor_limit() -> None:
    """Raise this process's soft limit on open files to its hard limit, as Go's runtime does:
    the soft default (often 1024) is a relic of select(), which nothing here uses, and every
    connection costs one descriptor."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        # An unlimited hard limit is one the kernel refuses as a soft one: then it stays.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
