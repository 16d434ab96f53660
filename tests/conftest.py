"""Fixtures shared by every test directory."""

import shutil
from collections.abc import Iterator

import pytest

from tests import rust_sdk_build
from tests.dns_server import AuthoritativeDnsServer, knot_binaries
from tests.peers import require_peer


@pytest.fixture(scope="session")
def knot() -> Iterator[AuthoritativeDnsServer]:
    """One Knot DNS server for the `.test` zone per test process (it starts in about 0.6 s)."""
    require_peer(knot_binaries(), "Knot DNS (knotd, knotc)", "knot")
    server = AuthoritativeDnsServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def dns_server(knot: AuthoritativeDnsServer) -> Iterator[AuthoritativeDnsServer]:
    """A real authoritative DNS server (Knot DNS) for the `.test` zone on a loopback port, its
    zone as the file wrote it when the test starts and again when it ends.

    `publish(name, rtype, value)` and `withdraw(name, rtype)` change the live zone;
    `nameserver` is its "127.0.0.1:PORT" for `dns.nameservers`.
    """
    knot.reset()
    try:
        yield knot
    finally:
        knot.reset()


@pytest.fixture
def swaks_path() -> str:
    """The `swaks` command: a real SMTP submission client."""
    return require_peer(shutil.which("swaks"), "swaks", "swaks")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A session that will run the Rust SDK's test starts building its program now."""
    if any(item.path.name == "test_rust_sdk.py" for item in items):
        rust_sdk_build.start()


def pytest_unconfigure() -> None:
    rust_sdk_build.stop()
