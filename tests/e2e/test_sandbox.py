"""The README's first send: `postwire serve --sandbox` in one terminal, `postwire keys create`
in another, then the `resend` SDK sending from the sandbox domain, and the message read back
through the API and the CLI. Nothing may leave the machine; a production config refuses it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dkim
import httpx
import pytest
import resend

from tests.e2e.conftest import wait_until
from tests.network_traps import OutboundTraps, outbound_traps
from tests.processes import stop_process

SANDBOX_DOMAIN = "sandbox.postwire.test"
READY = re.compile(r"REST API listening on (http://\S+)")


def postwire(*args: str, cwd: Path, env: dict[str, str] | None = None) -> bytes:
    """A `postwire` subcommand, run as a user runs it; its standard output."""
    return subprocess.run(
        [sys.executable, "-m", "postwire", *args],
        cwd=cwd,
        env=env or user_env(),
        capture_output=True,
        check=True,
    ).stdout


def user_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POSTWIRE_")}
    return env | extra


class SandboxServer:
    """`postwire serve --sandbox` on the embedded default, in `directory`, its standard
    output and error kept in files there; `extra_env` adds to (or overrides) its environment."""

    def __init__(
        self, directory: Path, traps: OutboundTraps, extra_env: dict[str, str] | None = None
    ) -> None:
        self.stdout_path, self.stderr_path = directory / "serve.out", directory / "serve.err"
        # Port 0 for the listeners only, so runs never clash; the traps stand where any DNS
        # query or SMTP connection for a recipient would go.
        env = user_env(
            POSTWIRE_API_LISTEN="127.0.0.1:0",
            POSTWIRE_DASHBOARD_LISTEN="127.0.0.1:0",
            POSTWIRE_METRICS_LISTEN="127.0.0.1:0",
            POSTWIRE_SMTP_STARTTLS_LISTEN="127.0.0.1:0",
            POSTWIRE_SMTP_TLS_LISTEN="127.0.0.1:0",
            POSTWIRE_DNS_NAMESERVERS=traps.nameserver,
            POSTWIRE_DELIVERY_PORT=str(traps.smtp_port),
            POSTWIRE_DELIVERY_ROUTES=json.dumps({"routed.test": traps.smtp_address}),
        ) | (extra_env or {})
        with self.stdout_path.open("wb") as stdout, self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "postwire", "serve", "--sandbox"],
                cwd=directory,
                env=env,
                stdout=stdout,
                stderr=stderr,
            )
        self.base_url = ""

    def wait_ready(self) -> None:
        def ready() -> bool:
            assert self.process.poll() is None, self.stderr
            return "postwire is ready" in self.stderr

        wait_until(ready, "postwire serve --sandbox is ready")
        match = READY.search(self.stderr)
        assert match is not None
        self.base_url = match.group(1)

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text()

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[tuple[SandboxServer, OutboundTraps]]:
    with outbound_traps() as traps:
        server = SandboxServer(tmp_path, traps)
        try:
            server.wait_ready()
            yield server, traps
        finally:
            stop_process(server.process)
            resend.api_key = None


def test_a_first_send_is_held_signed_and_read_back(
    tmp_path: Path, sandbox: tuple[SandboxServer, OutboundTraps]
) -> None:
    server, traps = sandbox
    assert "SANDBOX: no email leaves this machine." in server.stdout
    assert "no email leaves this machine" in server.stderr
    # Warnings about records the Internet would refuse would only mislead here.
    assert "delivery.helo_name" not in server.stderr

    token = postwire("keys", "create", "--name", "me", cwd=tmp_path).decode().strip()
    resend.api_url, resend.api_key = server.base_url, token
    to = ["ann@example.org", "bob@routed.test"]
    sent = resend.Emails.send(
        {"from": f"Acme <onboarding@{SANDBOX_DOMAIN}>", "to": to, "subject": "Hello",
         "html": "<p>It works.</p>"}
    )  # fmt: skip
    wait_until(lambda: resend.Emails.get(sent["id"])["last_event"] == "delivered", "held")

    api = httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {token}"})
    listing = api.get("/sandbox/messages").json()
    assert [message["id"] for message in listing["data"]] == [sent["id"]]
    assert listing["data"][0]["recipients"] == to
    message = api.get(f"/sandbox/messages/{sent['id']}").json()
    assert message["object"] == "sandbox_message" and message["subject"] == "Hello"
    raw = message["raw"].encode()

    (domain,) = [d for d in resend.Domains.list()["data"] if d["name"] == SANDBOX_DOMAIN]
    assert domain["status"] == "verified"
    records = resend.Domains.get(domain["id"])["records"]
    (dkim_record,) = [record for record in records if record["record"] == "DKIM"]
    asked: list[bytes] = []

    def sandbox_key(name: bytes, timeout: int = 5) -> bytes:
        asked.append(name)
        return str(dkim_record["value"]).encode()

    assert dkim.verify(raw, dnsfunc=sandbox_key)
    resend.Domains.verify(domain["id"])  # nothing to look up: it stays verified
    assert resend.Domains.get(domain["id"])["status"] == "verified"
    assert asked == [f"{dkim_record['name']}.{SANDBOX_DOMAIN}.".encode()]

    listed = postwire("sandbox", "list", cwd=tmp_path).decode()
    assert sent["id"] in listed and "Hello" in listed
    assert postwire("sandbox", "show", sent["id"], "--raw", cwd=tmp_path) == raw
    shown = postwire("sandbox", "show", sent["id"], cwd=tmp_path).decode()
    assert "It works." in shown and "ann@example.org" in shown

    # Another team sees none of it.
    other = postwire("keys", "create", "--name", "other", "--new-team", "other", cwd=tmp_path)
    outsider = {"Authorization": f"Bearer {other.decode().strip()}"}
    assert api.get("/sandbox/messages", headers=outsider).json()["data"] == []
    assert api.get(f"/sandbox/messages/{sent['id']}", headers=outsider).status_code == 404
    api.close()

    assert traps.dns_queries() == 0, "no DNS query for any recipient"
    assert traps.smtp_connections() == 0, "no SMTP connection for any recipient"


PRODUCTION = 'data_dir = "data"\n'  # every listener at its production default: SMTP on 0.0.0.0


@pytest.mark.parametrize(
    ("config", "args"),
    [(PRODUCTION, ["--sandbox"]), (PRODUCTION + "sandbox = true\n", [])],
    ids=["--sandbox", "sandbox = true"],
)
def test_a_production_config_refuses_the_sandbox(
    tmp_path: Path, config: str, args: list[str]
) -> None:
    (tmp_path / "postwire.toml").write_text(config)
    result = subprocess.run(
        [sys.executable, "-m", "postwire", "serve", "--config", "postwire.toml", *args],
        cwd=tmp_path,
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2, result.stderr
    assert "sandbox mode is for one machine" in result.stderr
    assert "'smtp.starttls_listen' listens on 0.0.0.0:25" in result.stderr
    assert not (tmp_path / "data").exists(), "refused before anything was created"
