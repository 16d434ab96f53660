"""The TLS leg of the load: an `stunnel` client that takes plain SMTP on a loopback port and
carries each connection over TLS to a server's implicit-TLS listener.

`smtp-source` speaks only plain SMTP; behind this tunnel it drives an SMTPS (port 465 style)
listener as a TLS-capable bulk relay would. The tunnel does not verify the server's certificate
(the servers under test use a self-signed one). It runs in the foreground as a child of the
benchmark, so its CPU can be measured apart. Debian package: `stunnel4`.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.processes import stop_process

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


class TunnelError(RuntimeError):
    """stunnel is missing, did not start, or does not reach its server."""


def stunnel_path() -> str | None:
    return shutil.which("stunnel4") or shutil.which("stunnel")


def stunnel_version() -> str:
    """ "stunnel 5.68" (it prints its version to stderr and exits non-zero)."""
    path = stunnel_path()
    if path is None:
        return "stunnel not installed"
    output = subprocess.run([path, "-version"], capture_output=True, text=True, timeout=10)
    for line in (output.stderr + output.stdout).splitlines():
        if line.startswith("stunnel "):
            return " ".join(line.split()[:2])
    return "stunnel"


class StunnelClient:
    """`stunnel` in client mode: 127.0.0.1:`port` (plain) -> TLS -> 127.0.0.1:`target_port`."""

    def __init__(self, directory: Path, name: str, target_port: int) -> None:
        self.config_path = directory / f"stunnel-{name}.conf"
        self.log_path = directory / f"stunnel-{name}.log"
        self.name = name
        self.target_port = target_port
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        path = stunnel_path()
        if path is None:
            raise TunnelError("stunnel is not installed (Debian: apt-get install stunnel4)")
        self.port = free_port()
        # Errors only: a line per connection would cost CPU during the rounds. TCP_NODELAY is
        # stunnel's default on both sides, so SMTP's small replies are not held back.
        self.config_path.write_text(
            f"""foreground = yes
pid =
syslog = no
debug = err

[{self.name}]
client = yes
accept = 127.0.0.1:{self.port}
connect = 127.0.0.1:{self.target_port}
verifyChain = no
verifyPeer = no
"""
        )
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [path, str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_for_greeting()

    def _wait_for_greeting(self) -> None:
        """Until an SMTP greeting comes through the tunnel: stunnel listens and the TLS
        handshake with the server works."""
        deadline = time.monotonic() + START_TIMEOUT
        error = "timed out"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                self.process = None
                raise TunnelError(f"stunnel exited:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as probe:
                    greeting = probe.recv(512)
                    probe.sendall(b"QUIT\r\n")
                    probe.recv(512)
                if greeting.startswith(b"220"):
                    return
                error = f"greeting {greeting!r}"
            except OSError as exc:
                error = str(exc) or type(exc).__name__
            time.sleep(0.1)
        self.stop()
        raise TunnelError(f"no SMTP greeting through stunnel ({error}):\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process is None:
            return
        stop_process(self.process, STOP_TIMEOUT)
        self.process = None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
