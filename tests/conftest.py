"""Fixtures shared by every test directory."""

import shutil
from collections.abc import Iterator

import pytest

from tests.dns_server import AuthoritativeDnsServer, knot_binaries
from tests.peers import require_peer


@pytest.fixture
def dns_server() -> Iterator[AuthoritativeDnsServer]:
    """A real authoritative DNS server (Knot DNS) for the `.test` zone on a loopback port.

    `publish(name, rtype, value)` and `withdraw(name, rtype)` change the live zone;
    `nameserver` is its "127.0.0.1:PORT" for `dns.nameservers`.
    """
    require_peer(knot_binaries(), "Knot DNS (knotd, knotc)", "knot")
    server = AuthoritativeDnsServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def swaks_path() -> str:
    """The `swaks` command: a real SMTP submission client."""
    return require_peer(shutil.which("swaks"), "swaks", "swaks")
