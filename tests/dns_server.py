"""A real authoritative DNS server for tests: Knot DNS (`knotd`) on a loopback port.

It serves the zones it is given (default: all of `.test`) from a temporary directory, and
`publish`/`withdraw` change the live zone through `knotc` transactions, so a test sees exactly
what a resolver on the internet would see after a DNS change. Debian package: `knot`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import dns.exception
import dns.message
import dns.query
import dns.rcode

from tests.ports import free_port
from tests.processes import stop_process

KNOTD_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
START_TIMEOUT = 10.0
# Attempts at a free port: another process may take the one we picked before knotd binds it.
START_ATTEMPTS = 3


def knot_binaries() -> tuple[str, str] | None:
    """Paths of `knotd` and `knotc`, or None when Knot DNS is not installed."""
    knotd = shutil.which("knotd", path=KNOTD_SEARCH_PATH)
    knotc = shutil.which("knotc", path=KNOTD_SEARCH_PATH)
    return (knotd, knotc) if knotd and knotc else None


class DnsServerError(RuntimeError):
    """knotd did not start, or a zone change was refused."""


class AuthoritativeDnsServer:
    """One `knotd` process, authoritative for `zones`, listening on 127.0.0.1 (UDP and TCP)."""

    def __init__(self, zones: Sequence[str] = ("test",)) -> None:
        binaries = knot_binaries()
        if binaries is None:
            raise DnsServerError("knotd/knotc not found (Debian: apt-get install knot)")
        self.knotd, self.knotc = binaries
        self.zones = [zone.lower().strip(".") for zone in zones]
        # Short: the control socket's path must fit in sockaddr_un (108 bytes).
        self.directory = Path(tempfile.mkdtemp(prefix="knot-"))
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        # Every node a test changed, so `reset` can bring the zones back to their files.
        self._changed: set[tuple[str, str, str]] = set()

    @property
    def nameserver(self) -> str:
        """The server as `dns.nameservers` takes it: "127.0.0.1:PORT"."""
        return f"127.0.0.1:{self.port}"

    # --- life --------------------------------------------------------------------------------

    def start(self) -> None:
        for directory in ("zones", "db", "run"):
            (self.directory / directory).mkdir(exist_ok=True)
        for zone in self.zones:
            (self.directory / "zones" / f"{zone}.zone").write_text(_zone_file(zone))
        error = "no attempt made"
        for _ in range(START_ATTEMPTS):
            self.port = free_port(udp=True)
            self._write_config()
            log = (self.directory / "knotd.log").open("wb")
            self.process = subprocess.Popen(
                [self.knotd, "-c", str(self.directory / "knot.conf")],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            log.close()
            error = self._wait_until_serving()
            if not error:
                return
            self._stop_process()
        raise DnsServerError(f"knotd did not start: {error}\n{self.log()}")

    def stop(self) -> None:
        self._stop_process()
        shutil.rmtree(self.directory, ignore_errors=True)

    def log(self) -> str:
        path = self.directory / "knotd.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _stop_process(self) -> None:
        if self.process is None:
            return
        stop_process(self.process)
        self.process = None

    def _write_config(self) -> None:
        d = self.directory
        zones = "\n".join(f"  - domain: {zone}" for zone in self.zones)
        (d / "knot.conf").write_text(
            f"""\
server:
    rundir: "{d}/run"
    listen: 127.0.0.1@{self.port}
log:
  - target: stderr
    any: warning
database:
    storage: "{d}/db"
control:
    listen: "{d}/run/knot.sock"
template:
  - id: default
    storage: "{d}/zones"
    file: "%s.zone"
    # Changes live in the journal; the zone files stay as written.
    zonefile-sync: -1
zone:
{zones}
"""
        )

    def _wait_until_serving(self) -> str:
        """ "" once every zone answers its SOA over UDP, else why not."""
        deadline = time.monotonic() + START_TIMEOUT
        error = "timed out"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                return f"knotd exited with status {self.process.returncode}"
            try:
                for zone in self.zones:
                    query = dns.message.make_query(zone + ".", "SOA")
                    reply = dns.query.udp(query, "127.0.0.1", timeout=0.5, port=self.port)
                    if reply.rcode() != dns.rcode.NOERROR or not reply.answer:
                        raise DnsServerError(f"{zone}: {dns.rcode.to_text(reply.rcode())}")
                return ""
            except (dns.exception.DNSException, DnsServerError, OSError) as exc:
                error = str(exc) or type(exc).__name__
                time.sleep(0.05)
        return error

    # --- the live zone -----------------------------------------------------------------------

    def publish(self, name: str, rtype: str, value: str, ttl: int = 60) -> None:
        """Make `value` the only `rtype` record at `name` (absolute, final dot optional).

        TXT values are plain text (quoted and split into 255-byte strings here); other types
        take zone-file syntax, e.g. "10 mx.example.test." for MX.
        """
        zone, owner = self._locate(name)
        rdata = _txt_strings(value) if rtype.upper() == "TXT" else value.split()
        self._changed.add((zone, owner, rtype))
        with self._transaction(zone):
            self._knotc("zone-unset", zone, owner, rtype, missing_ok=True)
            self._knotc("zone-set", zone, owner, str(ttl), rtype, *rdata)

    def withdraw(self, name: str, rtype: str) -> None:
        """Remove every `rtype` record at `name`; nothing to remove is fine."""
        zone, owner = self._locate(name)
        with self._transaction(zone):
            self._knotc("zone-unset", zone, owner, rtype, missing_ok=True)

    def reset(self) -> None:
        """Remove every record `publish` added: the zones answer as their files say again, so
        one server serves test after test as if each had started its own."""
        for zone in {zone for zone, _, _ in self._changed}:
            with self._transaction(zone):
                for _, owner, rtype in sorted(c for c in self._changed if c[0] == zone):
                    self._knotc("zone-unset", zone, owner, rtype, missing_ok=True)
        self._changed.clear()

    def _locate(self, name: str) -> tuple[str, str]:
        fqdn = name.lower().strip(".")
        for zone in sorted(self.zones, key=len, reverse=True):
            if fqdn == zone or fqdn.endswith("." + zone):
                return zone, fqdn + "."
        raise DnsServerError(f"{name!r} is in none of the served zones {self.zones}")

    @contextlib.contextmanager
    def _transaction(self, zone: str) -> Iterator[None]:
        self._knotc("zone-begin", zone)
        try:
            yield
        except BaseException:
            self._knotc("zone-abort", zone, missing_ok=True)
            raise
        self._knotc("zone-commit", zone)

    def _knotc(self, *args: str, missing_ok: bool = False) -> None:
        socket_path = str(self.directory / "run" / "knot.sock")
        result = subprocess.run(
            [self.knotc, "-s", socket_path, *args], capture_output=True, text=True, timeout=10
        )
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()
            # knotc says "no such node" or "not exists" when there is nothing to remove.
            if missing_ok and any(why in output for why in ("no such", "not exist", "no active")):
                return
            raise DnsServerError(f"knotc {' '.join(args)}: {output}")


def _zone_file(zone: str) -> str:
    return f"""\
$ORIGIN {zone}.
$TTL 60
@   SOA ns.{zone}. hostmaster.{zone}. 1 3600 600 86400 60
@   NS  ns.{zone}.
ns  A   127.0.0.1
"""


def _txt_strings(value: str) -> list[str]:
    """A TXT value as quoted character-strings of at most 255 bytes, as DNS requires."""
    data = value.encode()
    chunks = [data[i : i + 255] for i in range(0, len(data), 255)] or [b""]
    return ['"' + _escape(chunk) + '"' for chunk in chunks]


def _escape(chunk: bytes) -> str:
    out = []
    for byte in chunk:
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\{byte:03d}")
    return "".join(out)
