"""A live `postwire serve` in a subprocess, driven by real clients (the `resend` SDK, httpx)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dkim
import dns.resolver
import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer

# The launcher is shared with the benchmarks; tests import these names from here.
from tests.live_postwire import DASHBOARD_READY as DASHBOARD_READY
from tests.live_postwire import READY as READY
from tests.live_postwire import SERVER_READY as SERVER_READY
from tests.live_postwire import START_TIMEOUT as START_TIMEOUT
from tests.live_postwire import LiveServer as LiveServer
from tests.live_postwire import clean_env
from tests.live_postwire import fqdn as fqdn
from tests.live_postwire import publish_records as publish_records
from tests.live_postwire import write_config as write_config
from tests.peers import require_peer
from tests.smtp_sink import running_smtp_sink, smtp_sink_binary
from tests.store_backends import table_rows

_clean_env = clean_env


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    server = LiveServer(config_path=tmp_path / "postwire.toml", data_dir=tmp_path / "data")
    write_config(server.config_path, server.data_dir)
    server.start()
    yield server
    if server.process is not None:
        server.stop()


DOMAIN = "mail-example.test"


@contextmanager
def serving(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, **config: Any
) -> Iterator[LiveServer]:
    """A live server resolving through `dns_server`, its config `write_config`'s keywords, and
    the `resend` SDK pointed at it with an admin key."""
    live = LiveServer(config_path=tmp_path / "postwire.toml", data_dir=tmp_path / "data")
    write_config(live.config_path, live.data_dir, nameservers=(dns_server.nameserver,), **config)
    live.start()
    resend.api_url = live.base_url
    resend.api_key = live.create_key("admin")
    try:
        yield live
    finally:
        resend.api_key = None
        if live.process is not None:
            live.stop()


@pytest.fixture
def server(tmp_path: Path, dns_server: AuthoritativeDnsServer) -> Iterator[LiveServer]:
    with serving(tmp_path, dns_server) as live:
        yield live


@pytest.fixture
def sink() -> Iterator[str]:
    """Postfix's smtp-sink on a loopback port, taking every message: its "host:port", for
    `routes` (a module that needs the messages kept defines a `sink` of its own)."""
    require_peer(smtp_sink_binary(), "Postfix's smtp-sink", "postfix")
    with running_smtp_sink() as (host, port):
        yield f"{host}:{port}"


@pytest.fixture(scope="module")
def shared_server(
    tmp_path_factory: pytest.TempPathFactory, knot: AuthoritativeDnsServer
) -> Iterator[LiveServer]:
    """One live server for the tests of a module that neither stop, restart nor reconfigure it,
    each in a team of its own (`team_server`). A module whose tests need other settings
    overrides this fixture with its own `serving(...)`."""
    with serving(tmp_path_factory.mktemp("shared-server"), knot) as live:
        yield live


@pytest.fixture
def team_server(shared_server: LiveServer, request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """The module's `shared_server`, the `resend` SDK pointed at it with a full-access key of a
    new team of the test's own: what one test creates, no other test sees. Names the test
    verifies (sending domains) must be its own too: the first team to verify a name owns it."""
    resend.api_url = shared_server.base_url
    resend.api_key = shared_server.create_key("admin", new_team=request.node.name[:80])
    try:
        yield shared_server
    finally:
        resend.api_key = None


def spool_events(data_dir: Path) -> list[dict[str, Any]]:
    """The events, read without Postwire's code from whichever store holds them (server
    stopped)."""
    return [json.loads(raw) for _, raw in table_rows(data_dir, "events")]


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def wait_for_status(domain_id: str, status: str, timeout: float = 15.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        domain = resend.Domains.get(domain_id)
        if domain["status"] == status or time.monotonic() > deadline:
            assert domain["status"] == status, domain
            return dict(domain)
        time.sleep(0.1)


def verified_domain(dns: AuthoritativeDnsServer, name: str = DOMAIN) -> dict[str, Any]:
    created = resend.Domains.create({"name": name})
    publish_records(dns, created)
    resend.Domains.verify(created["id"])
    return wait_for_status(created["id"], "verified")


def dkim_verifies(message: bytes, dns_server: AuthoritativeDnsServer) -> bool:
    """dkimpy, asking Knot for the public key like any receiver would."""
    resolver = dns.resolver.Resolver(configure=False)
    host, port = dns_server.nameserver.rsplit(":", 1)
    resolver.nameservers, resolver.port = [host], int(port)

    def txt(name: bytes, timeout: int = 5) -> bytes:
        answer = resolver.resolve(name.decode().rstrip("."), "TXT", lifetime=timeout)
        return b"".join(b"".join(record.strings) for record in answer)

    return bool(dkim.verify(message, dnsfunc=txt))
