"""A real Postfix MTA for tests: a private instance of Debian's postfix on a loopback port.

It plays a remote site that accepts mail and only later finds it cannot deliver it: mail for
each routed domain goes on to a given "host:port" (e.g. a receiver that answers 550 5.1.1),
and Postfix then sends its own DSN (RFC 3464) to the envelope sender, routed the same way (to
Postwire's listener, over TLS when the route says so). Nothing is ever looked up in DNS or
delivered locally: a domain without a route is refused at once.

The instance has its own configuration, queue and data directories under a temporary
directory, its `master` runs in the foreground as a child of the test, and it logs to a
`maillog` file there, so a failing test can show what Postfix did. Runs as root (Postfix drops
privileges to its `postfix` user itself). Debian package: `postfix`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.ports import free_port
from tests.processes import stop_process

POSTFIX_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
MASTER = Path("/usr/lib/postfix/sbin/master")
START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0
# Attempts at a free port: another process may take the one we picked before master binds it.
START_ATTEMPTS = 3
HOSTNAME = "mta.postfix.test"


def postfix_unavailable() -> str | None:
    """Why a private Postfix instance cannot run here, or None when it can."""
    if shutil.which("postfix", path=POSTFIX_SEARCH_PATH) is None or not MASTER.exists():
        return "Postfix is not installed: apt-get install -y postfix"
    if os.geteuid() != 0:
        return "a private Postfix instance must be started as root"
    return None


class PostfixError(RuntimeError):
    """The instance did not start."""


class PostfixMta:
    """One Postfix instance whose smtpd listens on 127.0.0.1:`port`.

    `routes` maps a domain to the "host:port" its mail is relayed to, in clear;
    `tls_routes` does the same with TLS required (`smtp_tls_security_level = encrypt`: no
    delivery without STARTTLS, the certificate is not verified). Clients on 127.0.0.0/8 may
    relay to any routed domain.
    """

    def __init__(
        self, routes: Mapping[str, str], tls_routes: Mapping[str, str] | None = None
    ) -> None:
        self.postfix = shutil.which("postfix", path=POSTFIX_SEARCH_PATH) or "postfix"
        self.routes = dict(routes)
        self.tls_routes = dict(tls_routes or {})
        # Not under pytest's tmp_path: that is private to root, and Postfix's daemons run as
        # the `postfix` user.
        self.directory = Path(tempfile.mkdtemp(prefix="postfix-"))
        self.directory.chmod(0o755)
        self.config_directory = self.directory / "etc"
        self.queue_directory = self.directory / "queue"
        self.data_directory = self.directory / "data"
        self.maillog_path = self.directory / "maillog"
        self.host = "127.0.0.1"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """Where its smtpd listens, as "host:port" (what `delivery.routes` takes)."""
        return f"{self.host}:{self.port}"

    # --- life --------------------------------------------------------------------------------

    def start(self) -> None:
        for directory in (self.config_directory, self.queue_directory, self.data_directory):
            directory.mkdir(exist_ok=True)
        shutil.chown(self.data_directory, user="postfix")
        error = "no attempt made"
        for _ in range(START_ATTEMPTS):
            self.port = free_port()
            self._write_config()
            # `postfix check` creates the queue's directories with their owners and modes.
            check = subprocess.run(
                [self.postfix, "-c", str(self.config_directory), "check"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            if check.returncode != 0:
                raise PostfixError(f"postfix check failed: {check.stdout}{check.stderr}")
            # `-s`: master stays in the foreground (no `-w`), leading a session and a process
            # group of its own that holds every daemon it starts; stop() ends that group.
            output = (self.directory / "master.out").open("wb")
            self.process = subprocess.Popen(
                [str(MASTER), "-c", str(self.config_directory), "-s"],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
            output.close()
            error = self._wait_until_serving()
            if not error:
                return
            self._stop_process()
        raise PostfixError(f"postfix did not start: {error}\n{self.maillog()}")

    def stop(self) -> None:
        self._stop_process()
        shutil.rmtree(self.directory, ignore_errors=True)

    def maillog(self) -> str:
        """Everything this instance logged so far."""
        path = self.maillog_path
        return path.read_text(errors="replace") if path.exists() else ""

    def _stop_process(self) -> None:
        if self.process is None:
            return
        group = self.process.pid
        stop_process(self.process, STOP_TIMEOUT)  # master ends its daemons on SIGTERM, then exits
        # master leaves its daemons to end on its SIGTERM; any still running after a while
        # (or all of them, when master itself had died) must not outlive the directory.
        deadline = time.monotonic() + STOP_TIMEOUT
        with contextlib.suppress(ProcessLookupError):
            while time.monotonic() < deadline:
                os.killpg(group, 0)
                time.sleep(0.05)
            os.killpg(group, signal.SIGKILL)
        self.process = None

    def _wait_until_serving(self) -> str:
        """ "" once smtpd greets on the port, else why not."""
        deadline = time.monotonic() + START_TIMEOUT
        error = "timed out"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                output = (self.directory / "master.out").read_text(errors="replace")
                return f"master exited with status {self.process.returncode} {output}"
            try:
                with socket.create_connection((self.host, self.port), timeout=2) as sock:
                    greeting = sock.recv(512)
                    sock.sendall(b"QUIT\r\n")
                if greeting.startswith(b"220 "):
                    return ""
                error = f"greeting {greeting!r}"
            except OSError as exc:
                error = str(exc) or type(exc).__name__
            time.sleep(0.1)
        return error

    # --- configuration -----------------------------------------------------------------------

    def _write_config(self) -> None:
        routed = [*self.routes, *self.tls_routes]
        transport = "".join(
            f"{domain} smtp:{_bracketed(target)}\n" for domain, target in self.routes.items()
        ) + "".join(
            f"{domain} tls-required:{_bracketed(target)}\n"
            for domain, target in self.tls_routes.items()
        )
        (self.config_directory / "transport").write_text(transport)
        (self.config_directory / "main.cf").write_text(
            f"""\
compatibility_level = 3.6
queue_directory = {self.queue_directory}
data_directory = {self.data_directory}
maillog_file = {self.maillog_path}
# A safety check of the postfix command: the log may only go under these prefixes.
maillog_file_prefixes = {self.directory}
myhostname = {HOSTNAME}
inet_interfaces = {self.host}
inet_protocols = ipv4
smtpd_banner = $myhostname ESMTP
smtpd_peername_lookup = no
biff = no

# No local delivery and no DNS: routed domains are relayed, everything else bounces at once.
mydestination =
local_recipient_maps =
alias_maps =
alias_database =
local_transport = error:5.1.1 no local delivery on this test MTA
default_transport = error:5.1.2 no route to this domain on this test MTA
relay_domains = {", ".join(routed)}
relay_recipient_maps =
mynetworks = 127.0.0.0/8
transport_maps = texthash:{self.config_directory / "transport"}
smtp_dns_support_level = disabled
smtp_host_lookup = native

# Seconds, not hours: a deferral is retried, and bounced when it keeps failing, within a test.
queue_run_delay = 1s
minimal_backoff_time = 1s
maximal_backoff_time = 2s
maximal_queue_lifetime = 30s
bounce_queue_lifetime = 30s
delay_warning_time = 0h
smtp_connect_timeout = 5s
smtp_helo_timeout = 10s
smtp_tls_loglevel = 1
"""
        )
        (self.config_directory / "master.cf").write_text(
            f"""\
# service type  private unpriv  chroot  wakeup  maxproc command
{self.host}:{self.port} inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
smtp      unix  -       -       n       -       -       smtp
tls-required unix -     -       n       -       -       smtp
  -o smtp_tls_security_level=encrypt
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
"""
        )


@contextlib.contextmanager
def running_postfix(
    routes: Mapping[str, str], tls_routes: Mapping[str, str] | None = None
) -> Iterator[PostfixMta]:
    """A started `PostfixMta`, stopped (and its directory removed) on exit."""
    mta = PostfixMta(routes, tls_routes)
    try:
        mta.start()
        yield mta
    finally:
        mta.stop()


def _bracketed(target: str) -> str:
    """ "host:port" as a next hop without MX lookup: "[host]:port"."""
    host, _, port = target.rpartition(":")
    return f"[{host.strip('[]')}]:{port}"
