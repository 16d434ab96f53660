"""The system under test: `postwire serve` in a subprocess, with a sending domain verified for
real against a Knot DNS server on loopback."""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from tests.dns_server import AuthoritativeDnsServer
from tests.processes import stop_process

READY = re.compile(r"REST API listening on (http://\S+)")
NO_SMTP_LISTENERS = "starttls_listen = []\ntls_listen = []\n"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
VERIFY_TIMEOUT = 30.0
# Lines of the server's log kept to explain a failure.
LOG_TAIL = 200


class BenchServerError(RuntimeError):
    """The server did not start, stop, or set up as the benchmark needs."""


class BenchServer:
    """One `postwire serve` on 127.0.0.1 with an ephemeral port and, unless `smtp_section` (the
    body of the config's `[smtp]` table) says otherwise, no SMTP listeners; `processes` as in
    the config (its worker processes are children of `pid`)."""

    def __init__(
        self,
        directory: Path,
        nameserver: str,
        *,
        smtp_section: str = NO_SMTP_LISTENERS,
        processes: int = 1,
    ) -> None:
        self.config_path = directory / "postwire.toml"
        self.data_dir = directory / "data"
        self.config_path.write_text(
            f"""data_dir = "{self.data_dir}"
processes = {processes}

[dns]
nameservers = ["{nameserver}"]

[api]
listen = "127.0.0.1:0"
public_url = "http://127.0.0.1:3000"
rate_limit = 0

[dashboard]
listen = "127.0.0.1:0"

[metrics]
listen = "127.0.0.1:0"

[smtp]
{smtp_section}"""
        )
        self.process: subprocess.Popen[str] | None = None
        self.base_url = ""
        self.log_tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL)
        self._drain: threading.Thread | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "postwire", "serve", "--config", str(self.config_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=_clean_env(),
        )
        assert self.process.stderr is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            self.log_tail.append(line)
            if match := READY.search(line):
                self.base_url = match.group(1)
                # Keep reading: a full stderr pipe would stall the server mid-benchmark.
                self._drain = threading.Thread(target=self._drain_stderr, daemon=True)
                self._drain.start()
                return
        self.stop()
        raise BenchServerError("postwire did not start:\n" + self.log())

    def _drain_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            self.log_tail.append(line)

    def log(self) -> str:
        return "".join(self.log_tail)

    def wait_for_log(
        self, pattern: re.Pattern[str], timeout: float = START_TIMEOUT
    ) -> re.Match[str]:
        """The first match of `pattern` in a line of the server's log, waiting for it (bounded)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.log_tail):
                if match := pattern.search(line):
                    return match
            if self.process is None or self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise BenchServerError(f"no log line matched {pattern.pattern!r}:\n" + self.log())

    def stop(self) -> None:
        if self.process is None:
            return
        stop_process(self.process, STOP_TIMEOUT)
        if self._drain is not None:
            self._drain.join(timeout=5)
        self.process = None

    def create_key(self, name: str) -> str:
        """A full-access token from `postwire keys create`, as an operator makes one."""
        command = [sys.executable, "-m", "postwire", "keys", "create", "--name", name]
        command += ["--config", str(self.config_path)]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=True,
            env=_clean_env(),
            timeout=60,
        )
        return result.stdout.strip()


def _clean_env() -> dict[str, str]:
    # POSTWIRE_* overrides in the caller's environment would change the config under test.
    return {k: v for k, v in os.environ.items() if not k.startswith("POSTWIRE_")}


def verify_domain(client: httpx.Client, dns: AuthoritativeDnsServer, name: str) -> str:
    """Create `name`, publish the records it asks for, verify it; return its id once verified."""
    created = _ok(client.post("/domains", json={"name": name}))
    for record in created["records"]:
        owner = record["name"]
        fqdn = owner if owner.endswith(name) else f"{owner}.{name}"
        if record["type"] == "MX":
            dns.publish(fqdn, "MX", f"{record['priority']} {record['value']}.")
        else:
            dns.publish(fqdn, record["type"], record["value"])
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
