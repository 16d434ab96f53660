"""A live `postwire serve` in a subprocess, driven by real clients (the `resend` SDK, httpx)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dkim
import dns.resolver
import lmdb
import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer

READY = re.compile(r"REST API listening on (http://\S+)")
DASHBOARD_READY = re.compile(r"dashboard listening on (http://\S+)")
# Logged once every service is ready, worker processes included.
SERVER_READY = re.compile(r"postwire is ready")
# Generous: the suite runs in parallel workers beside other heavy tests on 2 cores.
START_TIMEOUT = 60.0


@dataclass
class LiveServer:
    """A live `postwire serve` whose whole log is read by a thread as it comes: the pipe never
    fills (a full one would block the server's logging), and tests wait for lines of it."""

    config_path: Path
    data_dir: Path
    process: subprocess.Popen[str] | None = None
    base_url: str = ""
    log_lines: list[str] = field(default_factory=list)
    _log_changed: threading.Condition = field(default_factory=threading.Condition)
    _reader: threading.Thread | None = None
    # Where this run's lines begin in `log_lines`, which keeps earlier runs' (a restart).
    _run_start: int = 0

    def start(self) -> None:
        """Start the server (again, after a stop or a kill) and return once all of it serves:
        the REST API answers from its first line, but SMTP and worker processes start after
        it."""
        if self._reader is not None:
            self._reader.join(timeout=10)  # the last run's log, read to its end
        with self._log_changed:
            self._run_start = len(self.log_lines)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "postwire", "serve", "--config", str(self.config_path)],
            stderr=subprocess.PIPE,
            text=True,
            env=_clean_env(),
        )
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        api = self.wait_for_log(READY, START_TIMEOUT, what="the REST API to listen")
        self.base_url = api.group(1)
        self.wait_for_log(SERVER_READY, START_TIMEOUT, what="postwire is ready")

    def _read_log(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            with self._log_changed:
                self.log_lines.append(line)
                self._log_changed.notify_all()
        with self._log_changed:
            self._log_changed.notify_all()

    def log_text(self) -> str:
        with self._log_changed:
            return "".join(self.log_lines)

    def wait_for_log(
        self, pattern: re.Pattern[str] | str, timeout: float = 15.0, *, what: str = ""
    ) -> re.Match[str]:
        """The first match of `pattern` in this run's log, waiting up to `timeout` seconds."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        with self._log_changed:
            while True:
                if match := regex.search("".join(self.log_lines[self._run_start :])):
                    return match
                exited = self.process is None or self.process.poll() is not None
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (exited and not self._reader_alive()):
                    raise AssertionError(
                        f"no {what or regex.pattern!r} in the server's log"
                        f"{' (the server exited)' if exited else ''}:\n" + "".join(self.log_lines)
                    )
                self._log_changed.wait(min(remaining, 0.5))

    def _reader_alive(self) -> bool:
        return self._reader is not None and self._reader.is_alive()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.process is not None
        self.process.send_signal(sig)
        status = self.process.wait(timeout=20)
        self.process = None
        return status

    def create_key(
        self,
        name: str = "test",
        *,
        permission: str = "full_access",
        domain_id: str | None = None,
        new_team: str | None = None,
    ) -> str:
        """A token from `postwire keys create`, the same command an operator runs."""
        command = [sys.executable, "-m", "postwire", "keys", "create", "--name", name]
        command += ["--config", str(self.config_path), "--permission", permission]
        if domain_id is not None:
            command += ["--domain", domain_id]
        if new_team is not None:
            command += ["--new-team", new_team]
        result = subprocess.run(
            command, capture_output=True, text=True, check=True, env=_clean_env()
        )
        return result.stdout.strip()


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("POSTWIRE_")}


def write_config(
    path: Path,
    data_dir: Path,
    *,
    rate_limit: int = 0,
    nameservers: tuple[str, ...] = (),
    routes: dict[str, str] | None = None,
    starttls_listen: tuple[str, ...] = (),
    tls_listen: tuple[str, ...] = (),
    allow_private_webhooks: bool = False,
    api_listen: str = "127.0.0.1:0",
    public_url: str = "http://127.0.0.1:3000",
    processes: int = 1,
    delivery_port: int = 25,
    allow_private_destinations: bool = False,
    dashboard_listen: str = "127.0.0.1:0",
    dashboard_public_url: str | None = None,
    auth_signup: str = "invite_only",
    auth_extra: str = "",
    metrics_listen: str = "127.0.0.1:0",
    metrics_extra: str = "",
    api_extra: str = "",
    smtp_extra: str = "",
    spool_map_size: int | None = None,
    sandbox: bool = False,
    extra_tables: str = "",
) -> None:
    """`routes` (domain pattern -> "host:port") becomes the `[delivery.routes]` table;
    `starttls_listen` and `tls_listen` ("host:port" each) the SMTP listeners, none by default;
    `allow_private_webhooks` lets webhooks reach receivers on loopback; `api_listen` and
    `public_url` where the API listens and the base of the links it puts in mail; `processes`
    the service processes (the production default would be one per core); `delivery_port`
    the port of the MX hosts DNS names, and `allow_private_destinations` lets those hosts be
    on loopback (the test-only setting: a receiver there). `dashboard_listen` and
    `dashboard_public_url` place the dashboard (any free port by default, so servers of
    parallel tests never collide; the public URL then defaults from the listener);
    `auth_signup` is `auth.signup` and `auth_extra` raw TOML lines appended to `[auth]`;
    `metrics_listen` the Prometheus listener (any free port by default, like the dashboard)
    and `metrics_extra` raw TOML lines appended to `[metrics]`;
    `api_extra` and `smtp_extra` raw TOML lines appended to `[api]` and `[smtp]`;
    `spool_map_size` is `spool.map_size` (its reserves are an eighth of it); `sandbox` turns
    sandbox mode on; `extra_tables` raw TOML tables appended to the file (e.g. `[broadcasts]`)."""
    servers = ", ".join(f'"{server}"' for server in nameservers)
    listeners = ", ".join(f'"{listener}"' for listener in starttls_listen)
    tls_listeners = ", ".join(f'"{listener}"' for listener in tls_listen)
    dashboard_url = (
        "" if dashboard_public_url is None else f'public_url = "{dashboard_public_url}"\n'
    )
    routes_table = ""
    if routes is not None:
        entries = "".join(f'"{pattern}" = "{target}"\n' for pattern, target in routes.items())
        routes_table = f"\n[delivery.routes]\n{entries}"
    spool_table = "" if spool_map_size is None else f"\n[spool]\nmap_size = {spool_map_size}\n"
    path.write_text(
        f"""data_dir = "{data_dir}"
processes = {processes}
sandbox = {"true" if sandbox else "false"}

[dns]
nameservers = [{servers}]

[api]
listen = "{api_listen}"
public_url = "{public_url}"
rate_limit = {rate_limit}
{api_extra}

[smtp]
starttls_listen = [{listeners}]
tls_listen = [{tls_listeners}]
{smtp_extra}

[webhooks]
allow_private_targets = {"true" if allow_private_webhooks else "false"}

[dashboard]
listen = "{dashboard_listen}"
{dashboard_url}
[metrics]
listen = "{metrics_listen}"
{metrics_extra}

[auth]
signup = "{auth_signup}"
{auth_extra}

[delivery]
port = {delivery_port}
allow_private_destinations = {"true" if allow_private_destinations else "false"}
{routes_table}{spool_table}{extra_tables}"""
    )


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
    """The events, read with the independent `lmdb` package (server stopped)."""
    env = lmdb.open(str(data_dir / "spool"), readonly=True, lock=False, max_dbs=32)
    events_db = env.open_db(b"events", create=False)
    with env.begin() as txn:
        events = [json.loads(bytes(raw)) for _, raw in txn.cursor(db=events_db)]
    env.close()
    return events


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def fqdn(record_name: str, domain: str) -> str:
    return record_name if record_name.endswith(domain) else f"{record_name}.{domain}"


def publish_records(dns: AuthoritativeDnsServer, domain: dict[str, Any]) -> None:
    for record in domain["records"]:
        name = fqdn(record["name"], domain["name"])
        if record["type"] == "MX":
            dns.publish(name, "MX", f"{record['priority']} {record['value']}.")
        else:
            dns.publish(name, record["type"], record["value"])


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
