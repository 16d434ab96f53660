"""A live server with one team that can send: its owner (made with `postwire users create`),
an API key (`postwire keys create`) and a domain verified through Knot DNS. For the browser
tests of a module that share one server; nothing is delivered unless a test routes it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.chromium import chromium_path
from tests.dashboard.conftest import DashboardServer
from tests.dns_server import AuthoritativeDnsServer, knot_binaries
from tests.e2e.conftest import _clean_env, publish_records, wait_until, write_config
from tests.peers import require_peer
from tests.ports import free_port

PASSWORD = "a long and careful passphrase 26"


@dataclass
class SendingTeam:
    server: DashboardServer
    owner: str
    domain: str
    api: httpx.Client  # the REST API with the team's full-access key

    def created(self, path: str, body: dict[str, Any]) -> str:
        """POST `body` to the API; the id of what it made."""
        answer = self.api.post(path, json=body)
        assert answer.status_code in (200, 201), answer.text
        made: str = answer.json()["id"]
        return made


@contextmanager
def sending_team(
    directory: Path, *, owner: str, domain: str, **config: Any
) -> Iterator[SendingTeam]:
    """Start the server (`write_config` keywords in `config`), make the team, verify `domain`."""
    require_peer(knot_binaries(), "Knot DNS (knotd, knotc)", "knot")
    chromium_path()
    dns = AuthoritativeDnsServer()
    dns.start()
    port = free_port()
    server = DashboardServer(config_path=directory / "postwire.toml", data_dir=directory / "data")
    settings: dict[str, Any] = {
        "nameservers": (dns.nameserver,),
        "dashboard_listen": f"127.0.0.1:{port}",
        "dashboard_public_url": f"http://localhost:{port}",
    }
    write_config(server.config_path, server.data_dir, **(settings | config))
    api = httpx.Client(timeout=30, limits=httpx.Limits(max_keepalive_connections=0))
    try:
        server.start()
        server.create_user(owner, PASSWORD, team=domain.split(".")[0].title())
        command = [sys.executable, "-m", "postwire", "keys", "create", "--name", "pages"]
        token = subprocess.run(
            [*command, "--config", str(server.config_path)],
            capture_output=True,
            text=True,
            env=_clean_env(),
            check=True,
        ).stdout.strip()
        api.base_url = httpx.URL(server.base_url)
        api.headers["Authorization"] = f"Bearer {token}"
        made = api.post("/domains", json={"name": domain}).json()
        publish_records(dns, made)
        api.post(f"/domains/{made['id']}/verify")
        wait_until(
            lambda: api.get(f"/domains/{made['id']}").json()["status"] == "verified",
            f"{domain} verified",
        )
        yield SendingTeam(server, owner, domain, api)
    finally:
        api.close()
        if server.process is not None:
            server.stop()
        dns.stop()
