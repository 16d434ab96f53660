"""Loopback sockets that only record whether anything reached them: a DNS server address and
an SMTP port to point a service at, for tests proving it never looked anything up or
connected anywhere."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class OutboundTraps:
    dns: socket.socket  # UDP: every query would wait here
    smtp: socket.socket  # TCP, listening: every connection would wait in its backlog

    @property
    def nameserver(self) -> str:
        """The DNS trap as `dns.nameservers` takes it: "127.0.0.1:PORT"."""
        return f"127.0.0.1:{self.dns.getsockname()[1]}"

    @property
    def smtp_port(self) -> int:
        return int(self.smtp.getsockname()[1])

    @property
    def smtp_address(self) -> str:
        """The SMTP trap as a `delivery.routes` target: "127.0.0.1:PORT"."""
        return f"127.0.0.1:{self.smtp_port}"

    def dns_queries(self) -> int:
        """How many datagrams reached the DNS trap (taking them)."""
        count = 0
        while True:
            try:
                self.dns.recv(65535)
            except BlockingIOError:
                return count
            count += 1

    def smtp_connections(self) -> int:
        """How many connections reached the SMTP trap (taking them)."""
        count = 0
        while True:
            try:
                connection, _ = self.smtp.accept()
            except BlockingIOError:
                return count
            connection.close()
            count += 1


@contextmanager
def outbound_traps() -> Iterator[OutboundTraps]:
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as dns,
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as smtp,
    ):
        dns.bind(("127.0.0.1", 0))
        smtp.bind(("127.0.0.1", 0))
        smtp.listen(64)
        dns.setblocking(False)
        smtp.setblocking(False)
        yield OutboundTraps(dns, smtp)
