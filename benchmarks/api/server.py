"""The system under test: `postwire serve` in a subprocess (the tests' launcher), with a sending
domain verified for real against a Knot DNS server on loopback."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
from tests.dns_server import AuthoritativeDnsServer
from tests.live_postwire import LiveServer, publish_records, write_config

VERIFY_TIMEOUT = 30.0
# Lines of the server's log kept past its start-up, to explain a failure: a server under load
# may log without end.
LOG_TAIL = 200


class BenchServerError(RuntimeError):
    """The server did not set up as the benchmark needs."""


class BenchServer(LiveServer):
    """The tests' live server on 127.0.0.1, its listeners on ephemeral ports, no SMTP listener
    unless `config` (`write_config`'s keywords) opens one; `processes` as in the config (its
    worker processes are children of `pid`). Created, it has written its config; `start` runs
    it."""

    def __init__(
        self, directory: Path, nameserver: str, *, processes: int = 1, **config: Any
    ) -> None:
        super().__init__(
            config_path=directory / "postwire.toml",
            data_dir=directory / "data",
            log_tail=LOG_TAIL,
        )
        write_config(
            self.config_path,
            self.data_dir,
            nameservers=(nameserver,),
            processes=processes,
            **config,
        )

    def log(self) -> str:
        """The server's start-up and the tail of its log since."""
        return self.log_text()


def verify_domain(client: httpx.Client, dns: AuthoritativeDnsServer, name: str) -> str:
    """Create `name`, publish the records it asks for, verify it; return its id once verified."""
    created = _ok(client.post("/domains", json={"name": name}))
    publish_records(dns, created)
    domain_id: str = created["id"]
    _ok(client.post(f"/domains/{domain_id}/verify"))
    deadline = time.monotonic() + VERIFY_TIMEOUT
    while time.monotonic() < deadline:
        domain = _ok(client.get(f"/domains/{domain_id}"))
        if domain["status"] == "verified":
            return domain_id
        time.sleep(0.2)
    raise BenchServerError(f"{name} was not verified within {VERIFY_TIMEOUT:g} s: {domain}")


def _ok(response: httpx.Response) -> Any:
    if not response.is_success:
        raise BenchServerError(
            f"{response.request.method} {response.request.url.path}: "
            f"{response.status_code} {response.text}"
        )
    return response.json()
