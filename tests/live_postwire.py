"""A live `postwire serve` in a subprocess, as the tests and the benchmarks run it: its config
(`write_config`), its whole standard error read as it comes (`ServerLog`), started, waited for,
stopped and restarted (`LiveServer`), and the operator's commands run against its config."""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tests.dns_server import AuthoritativeDnsServer
from tests.processes import stop_process
from tests.store_backends import store_table

if TYPE_CHECKING:
    from postwire.store.accounts import Permission

READY = re.compile(r"REST API listening on (http://\S+)")
DASHBOARD_READY = re.compile(r"dashboard listening on (http://\S+)")
# Logged once every service is ready, worker processes included.
SERVER_READY = re.compile(r"postwire is ready")
# Generous: the suite runs in parallel workers beside other heavy tests on 2 cores.
START_TIMEOUT = 60.0
# A graceful stop that takes longer than this is killed.
STOP_TIMEOUT = 20.0
COMMAND_TIMEOUT = 60.0


def clean_env() -> dict[str, str]:
    """This environment less POSTWIRE_* overrides, which would change the config under test."""
    return {k: v for k, v in os.environ.items() if not k.startswith("POSTWIRE_")}


class ServerLog:
    """The lines of a server's standard error, as a reader thread appends them; each start of
    the server begins a run. Unbounded (`tail` None), every line of every run is kept. With
    `tail`, only the lines of the current run up to "postwire is ready" and then its last `tail`
    lines are: memory stays bounded however much a long-running server logs."""

    def __init__(self, tail: int | None = None) -> None:
        self.changed = threading.Condition()
        self._bounded = tail is not None
        self._earlier: list[str] = []  # earlier runs' lines (unbounded only)
        self._head: list[str] = []  # this run's lines, all of them if unbounded
        self._tail: collections.deque[str] = collections.deque(maxlen=tail)
        self._dropped = 0
        self._ready = False

    def new_run(self) -> None:
        with self.changed:
            if not self._bounded:
                self._earlier += self._head
            self._head, self._dropped, self._ready = [], 0, False
            self._tail.clear()

    def append(self, line: str) -> None:
        with self.changed:
            if not self._bounded or not self._ready:
                self._head.append(line)
                if SERVER_READY.search(line):
                    self._ready = True
            else:
                if len(self._tail) == self._tail.maxlen:
                    self._dropped += 1
                self._tail.append(line)
            self.changed.notify_all()

    def run_text(self) -> str:
        """The current run's lines kept (call with `changed` held, or for a glance)."""
        return "".join(self._head) + "".join(self._tail)

    def text(self) -> str:
        with self.changed:
            dropped = f"[{self._dropped} lines not kept]\n" if self._dropped else ""
            return "".join(self._earlier + self._head) + dropped + "".join(self._tail)


@dataclass
class LiveServer:
    """A live `postwire serve` whose whole log is read by a thread as it comes: the pipe never
    fills (a full one would block the server's logging), and callers wait for lines of it.
    `log_tail` bounds what is kept of the log (`ServerLog`), for servers that log a lot."""

    config_path: Path
    data_dir: Path
    process: subprocess.Popen[str] | None = None
    base_url: str = ""
    log_tail: int | None = None
    _log: ServerLog = field(init=False, repr=False)
    _reader: threading.Thread | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._log = ServerLog(self.log_tail)

    @property
    def pid(self) -> int:
        """The main process's id (its worker processes are its children)."""
        assert self.process is not None, "the server is not running"
        return self.process.pid

    def start(self) -> None:
        """Start the server (again, after a stop or a kill) and return once all of it serves:
        the REST API answers from its first line, but SMTP and worker processes start after
        it. A server that does not get there is killed before the error is raised."""
        if self._reader is not None:
            self._reader.join(timeout=10)  # the last run's log, read to its end
        self._log.new_run()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "postwire", "serve", "--config", str(self.config_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=clean_env(),
        )
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        try:
            api = self.wait_for_log(READY, START_TIMEOUT, what="the REST API to listen")
            self.base_url = api.group(1)
            self.wait_for_log(SERVER_READY, START_TIMEOUT, what="postwire is ready")
        except AssertionError:
            self.stop(signal.SIGKILL)
            raise

    def _read_log(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            self._log.append(line)
        with self._log.changed:
            self._log.changed.notify_all()

    def log_text(self) -> str:
        """Every line kept of the log, earlier runs' included."""
        return self._log.text()

    def wait_for_log(
        self, pattern: re.Pattern[str] | str, timeout: float = 15.0, *, what: str = ""
    ) -> re.Match[str]:
        """The first match of `pattern` in this run's log, waiting up to `timeout` seconds."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        with self._log.changed:
            while True:
                if match := regex.search(self._log.run_text()):
                    return match
                exited = self.process is None or self.process.poll() is not None
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (exited and not self._reader_alive()):
                    raise AssertionError(
                        f"no {what or regex.pattern!r} in the server's log"
                        f"{' (the server exited)' if exited else ''}:\n" + self._log.text()
                    )
                self._log.changed.wait(min(remaining, 0.5))

    def _reader_alive(self) -> bool:
        return self._reader is not None and self._reader.is_alive()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int | None:
        """Send `sig` (SIGKILL for a crash), kill the server if it has not ended within
        `timeout` seconds, and read its log to the end. Its exit status; None if it was not
        running."""
        if self.process is None:
            return None
        process, self.process = self.process, None
        stop_process(process, timeout, sig)
        if self._reader is not None:
            self._reader.join(timeout=5)
        return process.returncode

    def restart(self, sig: int = signal.SIGTERM) -> int | None:
        """Stop the server with `sig` and start it again on the same config and data; the exit
        status of the run stopped."""
        status = self.stop(sig)
        self.start()
        return status

    def create_key(
        self,
        name: str = "test",
        *,
        permission: str = "full_access",
        domain_id: str | None = None,
        new_team: str | None = None,
    ) -> str:
        """A token from what `postwire keys create` runs (the command itself is tested as an
        operator runs it elsewhere): called in this process, it costs a few milliseconds where a
        new process costs about a second, once for every test that takes a team of its own."""
        if not _inside_trio():
            import trio

            from postwire.admin import create_key
            from postwire.config import load_config

            config = load_config(self.config_path, clean_env())
            access = cast("Permission", permission)
            _, token = trio.run(create_key, config, name, access, domain_id, None, new_team)
            return token
        command = [sys.executable, "-m", "postwire", "keys", "create", "--name", name]
        command += ["--config", str(self.config_path), "--permission", permission]
        if domain_id is not None:
            command += ["--domain", domain_id]
        if new_team is not None:
            command += ["--new-team", new_team]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=True,
            env=clean_env(),
            timeout=COMMAND_TIMEOUT,
        )
        return result.stdout.strip()

    def create_user(
        self, email: str, password: str, *, team: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`postwire users create --email E --password-stdin [--team T]`: the owner an operator
        bootstraps from the shell, its password given on standard input. Run in this process
        like `create_key` (what the command prints is the answer's standard error)."""
        if not _inside_trio():
            import trio

            from postwire.accounts.bootstrap import create_owner
            from postwire.config import load_config

            config = load_config(self.config_path, clean_env())
            created = trio.run(create_owner, config, email, team, password)
            what = "is now an owner of" if created.existed else "created, owner of"
            said = f"user {created.email} {what} team {created.team.name!r}\n"
            return subprocess.CompletedProcess(["postwire", "users", "create"], 0, "", said)
        command = [sys.executable, "-m", "postwire", "users", "create", "--email", email]
        command += ["--config", str(self.config_path), "--password-stdin"]
        if team is not None:
            command += ["--team", team]
        result = subprocess.run(
            command,
            input=password + "\n",
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=COMMAND_TIMEOUT,
        )
        assert result.returncode == 0, f"postwire users create failed:\n{result.stderr}"
        return result


def _inside_trio() -> bool:
    """Whether a Trio run is going on in this thread (a test under pytest-trio), where another
    `trio.run` cannot start."""
    import trio

    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return False
    return True


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
    delivery_extra: str = "",
    spool_map_size: int | None = None,
    sandbox: bool = False,
    tables: str = "",
    store: str | None = None,
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
    `api_extra`, `smtp_extra` and `delivery_extra` raw TOML lines appended to `[api]`, `[smtp]`
    and `[delivery]`; `spool_map_size` is `spool.map_size` (its reserves are an eighth of it);
    `sandbox` turns sandbox mode on; `tables` raw TOML tables appended at the end; `store` the
    `[store]` table in place of the one `PW_TEST_STORE` chooses (`store_backends.store_table`)."""
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
{delivery_extra}
{routes_table}{spool_table}{store_table(data_dir) if store is None else store}
{tables}"""
    )


def fqdn(record_name: str, domain: str) -> str:
    return record_name if record_name.endswith(domain) else f"{record_name}.{domain}"


def publish_records(dns: AuthoritativeDnsServer, domain: Mapping[str, Any]) -> None:
    """Publish in `dns` the records Postwire asks for `domain` (a domain as the API returns
    it), as its owner would at their DNS host."""
    for record in domain["records"]:
        name = fqdn(record["name"], domain["name"])
        if record["type"] == "MX":
            dns.publish(name, "MX", f"{record['priority']} {record['value']}.")
        else:
            dns.publish(name, record["type"], record["value"])
