"""A real rspamd for tests: Debian's `rspamd` with one normal worker on a loopback port.

It runs from a configuration directory of its own under tmp, on top of the package's rules
(`/etc/rspamd`), with everything that needs the network or Redis switched off: block lists,
fuzzy hashes, Bayes, neural networks, reputation, greylisting, remote maps. Its DNS resolver
points at a closed loopback port, so nothing a message names is ever looked up and the same
message always gets the same symbols. What remains are rspamd's own content rules (headers,
MIME structure, HTML, URLs, attachments), which is what the tests score.

Given a `nameserver` (a Knot DNS of the tests), rspamd asks it instead and checks DKIM, SPF,
DMARC and ARC as a receiver would: a test then sees rspamd verify Postwire's signature against
the records it published.

rspamd compiles its regular expressions with Hyperscan on first start (about 20 s of CPU);
the compiled cache is kept in one directory under tmp (one per user) shared by every run, so
later starts take about a second.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.ports import free_port
from tests.processes import stop_process

RSPAMD_SEARCH_PATH = "/usr/bin:/usr/sbin:/bin"
RSPAMD_CONFDIR = Path("/etc/rspamd")
# The first start compiles the Hyperscan cache: generous, on a machine others share.
START_TIMEOUT = 240.0
# Attempts at a free port: another process may take the one picked before rspamd binds it.
START_ATTEMPTS = 3
HYPERSCAN_CACHE = Path(tempfile.gettempdir()) / f"postwire-tests-rspamd-hyperscan-{os.getuid()}"

# Checks of the sender's DNS: on only when the server is given a nameserver of the tests.
AUTHENTICATION_MODULES = ("arc", "dkim", "dmarc", "spf")
# Modules that look things up on the network, need Redis, learn from earlier mail, or
# depend on the time of day: off, so that a message's symbols depend on the message alone.
DISABLED_MODULES = (
    "antivirus",
    "asn",
    "bimi",
    "clickhouse",
    "dcc",
    "dkim_signing",
    "elastic",
    "emails",
    "external_relay",
    "external_services",
    "fuzzy_check",
    "greylist",
    "hfilter",
    "history_redis",
    "metadata_exporter",
    "metric_exporter",
    "multimap",
    "mx_check",
    "neural",
    "p0f",
    "phishing",
    "ratelimit",
    "rbl",
    "replies",
    "reputation",
    "rspamd_update",
    "spamassassin",
    "spamtrap",
    "surbl",
    "url_redirector",
    "whitelist",
)


def rspamd_binary() -> str | None:
    """Path of `rspamd`, or None when Debian's package is not installed."""
    found = shutil.which("rspamd", path=RSPAMD_SEARCH_PATH)
    return found if found and RSPAMD_CONFDIR.is_dir() else None


class RspamdServerError(RuntimeError):
    """rspamd did not start."""


class RspamdServer:
    """One rspamd (main process, a normal worker, its Hyperscan helper) on 127.0.0.1."""

    def __init__(self, nameserver: str | None = None) -> None:
        binary = rspamd_binary()
        if binary is None:
            raise RspamdServerError("rspamd not found (Debian: apt-get install rspamd)")
        self.binary = binary
        self.directory = Path(tempfile.mkdtemp(prefix="rspamd-"))
        self.nameserver = nameserver  # "host:port"; None: DNS at a closed port
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """What `insights.rspamd_url` takes: the normal worker's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        for name in ("local.d", "db", "run", "log"):
            (self.directory / name).mkdir(exist_ok=True)
        HYPERSCAN_CACHE.mkdir(exist_ok=True)
        error = "no attempt made"
        for _ in range(START_ATTEMPTS):
            error = self._start_once()
            # rspamd ends at once when the free port it was given was taken meanwhile.
            if not error or "Address already in use" not in self.log():
                break
        if error:
            raise RspamdServerError(f"rspamd did not start: {error}\n{self.log()[-3000:]}")

    def _start_once(self) -> str:
        """ "" once rspamd serves on a fresh free port, else why not (and it is stopped)."""
        self.port = free_port()
        self._write_config()
        d = self.directory
        variables = {
            "LOCAL_CONFDIR": d,
            "DBDIR": d / "db",
            "RUNDIR": d / "run",
            "LOGDIR": d / "log",
        }
        command = [self.binary, "--no-fork", "--config", str(d / "rspamd.conf")]
        for name, value in variables.items():
            command += ["--var", f"{name}={value}"]
        # rspamd refuses to run its workers as root unless told to (tests often run as root).
        if os.geteuid() == 0:
            command.append("--insecure")
        (d / "log" / "rspamd.log").unlink(missing_ok=True)
        output = (d / "log" / "stdout.log").open("wb")
        self.process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        output.close()
        error = self._wait_until_serving()
        if error:
            self._stop_process()
        return error

    def stop(self) -> None:
        self._stop_process()
        shutil.rmtree(self.directory, ignore_errors=True)

    def log(self) -> str:
        texts = []
        for name in ("stdout.log", "rspamd.log"):
            path = self.directory / "log" / name
            if path.exists():
                texts.append(path.read_text(errors="replace"))
        return "\n".join(texts)

    def _stop_process(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None

    def _wait_until_serving(self) -> str:
        """ "" once the worker answers `/ping`, else why not."""
        deadline = time.monotonic() + START_TIMEOUT
        error = "timed out"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                return f"rspamd exited with status {self.process.returncode}"
            try:
                answer = httpx.get(f"{self.url}/ping", timeout=1)
                if answer.status_code == 200 and answer.text.strip() == "pong":
                    return ""
                error = f"/ping answered {answer.status_code}"
            except httpx.HTTPError as exc:
                error = str(exc) or type(exc).__name__
            time.sleep(0.1)
        return error

    def _write_config(self) -> None:
        d = self.directory
        nameserver = self.nameserver or f"127.0.0.1:{free_port(udp=True)}"
        # The package's rules and scores, its default options, one normal worker, no
        # controller, proxy or fuzzy storage (the worker runs the controller's periodic jobs).
        (d / "rspamd.conf").write_text(
            f"""\
.include "$CONFDIR/common.conf"
options {{
    pidfile = "$RUNDIR/rspamd.pid";
    .include "$CONFDIR/options.inc"
    .include(try=true; priority=1,duplicate=merge) "$LOCAL_CONFDIR/local.d/options.inc"
}}
logging {{
    type = "file";
    filename = "$LOGDIR/rspamd.log";
    level = "warning";
}}
worker "normal" {{
    bind_socket = "127.0.0.1:{self.port}";
    count = 1;
    .include "$CONFDIR/worker-normal.inc"
}}
"""
        )
        (d / "local.d" / "options.inc").write_text(
            f"""\
hs_cache_dir = "{HYPERSCAN_CACHE}/";
dns {{
    nameserver = ["{nameserver}"];
    timeout = 0.2s;
    retransmits = 1;
}}
"""
        )
        disabled = DISABLED_MODULES + (() if self.nameserver else AUTHENTICATION_MODULES)
        for module in disabled:
            (d / "local.d" / f"{module}.conf").write_text("enabled = false;\n")
        # Bayes keeps its statistics in Redis; without a server it only logs errors.
        (d / "local.d" / "classifier-bayes.conf").write_text("enabled = false;\n")


@contextmanager
def running_rspamd(nameserver: str | None = None) -> Iterator[RspamdServer]:
    """An rspamd serving on loopback until the block ends (asking `nameserver`, if given)."""
    server = RspamdServer(nameserver)
    try:
        server.start()
        yield server
    finally:
        server.stop()
