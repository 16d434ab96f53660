"""The baseline: Postfix itself as the relay under test, fed and drained like Postwire.

The tests' private Postfix instance (`tests.postfix_mta.PostfixMta`: its own configuration,
queue and data directories, `master` in the foreground leading its own process group) gets a
second smtpd listener with implicit TLS (`smtpd_tls_wrappermode`) and the certificate Postwire
serves, and relays the recipient domain to the same smtp-sink over up to 50 connections, as
Postwire does with `delivery.max_connections_per_site` = 50. Alone, Postfix signs nothing; given
a milter (OpenDKIM, see `opendkim.py`), every message passes through it, and a message the
milter cannot handle is refused with a temporary error rather than relayed unsigned.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from tests.postfix_mta import POSTFIX_SEARCH_PATH, PostfixMta

from benchmarks.cpu_time import process_group_cpu
from benchmarks.smtp.tunnel import free_port

CONCURRENCY = 50
# Where a message may sit until it is delivered; all empty once every message has left.
_QUEUES = ("maildrop", "incoming", "active", "deferred", "hold")


class PostfixRelay(PostfixMta):
    """A private Postfix relaying `domain` to `sink`, with smtpd on 127.0.0.1:`tls_port`
    speaking TLS from the first byte. The plain listener of `PostfixMta` stays: it is how the
    start-up waits for smtpd's greeting. `milter` ("unix:/path" or "inet:host:port") sees every
    message, from smtpd and from elsewhere; `more_routes` relays other domains elsewhere (a
    check's sink)."""

    def __init__(
        self,
        domain: str,
        sink: str,
        cert: Path,
        key: Path,
        *,
        milter: str | None = None,
        more_routes: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__({domain: sink, **(more_routes or {})})
        self.cert, self.key = cert, key
        self.milter = milter
        self.tls_port = 0

    def _write_config(self) -> None:
        super()._write_config()
        self.tls_port = free_port()
        with (self.config_directory / "main.cf").open("a") as main_cf:
            main_cf.write(
                f"""
# Benchmark: Postwire's certificate, and as many connections to the sink as Postwire opens.
smtpd_tls_cert_file = {self.cert}
smtpd_tls_key_file = {self.key}
smtp_destination_concurrency_limit = {CONCURRENCY}
default_process_limit = {4 * CONCURRENCY}
"""
            )
            if self.milter is not None:
                main_cf.write(
                    f"""
# Every message through the milter; none relayed without it (4xx while it is unreachable).
smtpd_milters = {self.milter}
non_smtpd_milters = {self.milter}
milter_default_action = tempfail
"""
                )
        with (self.config_directory / "master.cf").open("a") as master_cf:
            master_cf.write(
                f"""{self.host}:{self.tls_port} inet n - n - - smtpd
  -o smtpd_tls_wrappermode=yes
  -o smtpd_tls_security_level=encrypt
"""
            )

    def cpu_seconds(self) -> float:
        """CPU used so far by master and every daemon it started (smtpd, cleanup, qmgr, smtp,
        trivial-rewrite, postlogd, ...), those that have exited included."""
        assert self.process is not None
        return process_group_cpu(self.process.pid)

    def queued(self) -> int:
        """Messages still in the queue, in any state."""
        return sum(
            1
            for queue in _QUEUES
            if (self.queue_directory / queue).exists()
            for path in (self.queue_directory / queue).rglob("*")
            if path.is_file()
        )

    def wait_until_empty(self, timeout: float) -> int:
        """Wait until the queue is empty (bounded); the messages still queued (0 when empty)."""
        deadline = time.monotonic() + timeout
        while (left := self.queued()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return left


def postfix_version() -> str:
    """ "Postfix 3.7.11"."""
    try:
        version = subprocess.run(
            ["postconf", "-d", "-h", "mail_version"],
            capture_output=True,
            text=True,
            timeout=10,
            env={"PATH": POSTFIX_SEARCH_PATH},
        ).stdout.strip()
    except OSError:
        return "Postfix"
    return f"Postfix {version}" if version else "Postfix"
