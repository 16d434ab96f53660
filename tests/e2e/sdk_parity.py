"""What the SDK-parity tests share: one live server per module resolving through its own Knot,
and a team of each test's own with a verified sending domain."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.dns_server import AuthoritativeDnsServer, knot_binaries
from tests.e2e.conftest import LiveServer, publish_records, write_config
from tests.peers import require_peer


@dataclass
class World:
    server: LiveServer
    dns: AuthoritativeDnsServer


@contextmanager
def live_world(directory: Path) -> Iterator[World]:
    """A `postwire serve` resolving through a Knot of its own, for one test module."""
    require_peer(knot_binaries(), "Knot DNS (knotd, knotc)", "knot")
    dns = AuthoritativeDnsServer()
    dns.start()
    live = LiveServer(config_path=directory / "postwire.toml", data_dir=directory / "data")
    try:
        write_config(live.config_path, live.data_dir, nameservers=(dns.nameserver,))
        live.start()
        yield World(live, dns)
    finally:
        if live.process is not None:
            live.stop()
        dns.stop()


def team_client(server: LiveServer, team: str) -> httpx.Client:
    """An API client with a full-access key of a new team called `team`."""
    token = server.create_key("admin", new_team=team)
    return httpx.Client(
        base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def verify_domain(api: httpx.Client, dns: AuthoritativeDnsServer, name: str) -> dict[str, Any]:
    """Add `name` to the client's team, publish its records in Knot and wait until verified."""
    created = api.post("/domains", json={"name": name})
    assert created.status_code == 201, created.text
    publish_records(dns, created.json())
    return wait_for_domain(api, created.json()["id"], "verified")


def wait_for_domain(
    api: httpx.Client, domain_id: str, status: str, timeout: float = 15.0
) -> dict[str, Any]:
    """Ask the verifier to check the domain until it reaches `status`."""
    deadline = time.monotonic() + timeout
    while True:
        api.post(f"/domains/{domain_id}/verify")
        domain: dict[str, Any] = api.get(f"/domains/{domain_id}").json()
        if domain["status"] == status:
            return domain
        assert time.monotonic() < deadline, domain
        time.sleep(0.1)
