"""Fixtures shared by every test directory."""

from collections.abc import Iterator

import pytest

from tests.dns_server import AuthoritativeDnsServer, knot_binaries


@pytest.fixture
def dns_server() -> Iterator[AuthoritativeDnsServer]:
    """A real authoritative DNS server (Knot DNS) for the `.test` zone on a loopback port.

    `publish(name, rtype, value)` and `withdraw(name, rtype)` change the live zone;
    `nameserver` is its "127.0.0.1:PORT" for `dns.nameservers`.
    """
    if knot_binaries() is None:
        pytest.skip("Knot DNS (knotd, knotc) is not installed: apt-get install -y knot")
    server = AuthoritativeDnsServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()
