"""Ports for the servers tests start: chosen now, bound later by the server.

A port picked by binding port 0 comes from the kernel's ephemeral range, which the kernel
also hands out to every later bind of port 0 (a listener the config leaves to the kernel, like
the dashboard's) and to outgoing connections: between the pick and the server's bind, another
socket may take it. Ports below that range are never handed out by the kernel, so only another
pick can take one, and picks are random over thousands of ports.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_LOWEST = 10_000


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port(*, udp: bool = False) -> int:
    """A loopback port free for TCP (and UDP too, with `udp`) right now, outside the kernel's
    ephemeral range."""
    highest = max(_LOWEST + 1_000, _ephemeral_start())
    while True:
        port = random.randrange(_LOWEST, highest)
        kinds = (socket.SOCK_STREAM, socket.SOCK_DGRAM) if udp else (socket.SOCK_STREAM,)
        try:
            for kind in kinds:
                with socket.socket(socket.AF_INET, kind) as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return port


def free_address() -> str:
    """`127.0.0.1:<free_port()>`, for a config's listen address."""
    return f"127.0.0.1:{free_port()}"
