"""Where delivery goes while a broadcast is measured: a TCP port that takes connections and never
greets them.

The broadcast benchmark measures messages spooled (rendered, signed, committed), not delivered.
Delivery still leases what is due and opens its connection to the route; here that connection
waits for a greeting that never comes (RFC 5321 allows five minutes), so the delivery engine
holds its messages in hand at almost no cost instead of competing for the cores being measured.
The kernel completes the handshakes (up to the backlog); nothing is ever accepted or read.
"""

from __future__ import annotations

import socket

BACKLOG = 64


class SilentListener:
    """A listening socket on 127.0.0.1 that never accepts."""

    def __init__(self) -> None:
        self._socket: socket.socket | None = None
        self.port = 0

    def start(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(BACKLOG)
        self.port = self._socket.getsockname()[1]

    def stop(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
